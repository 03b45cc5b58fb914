package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Ensure a state directory deleted under a daemon is noticed and remade
// with this daemon's lock and the record of this incarnation and of the
// earlier ones not yet released, so that another daemon is still refused
// the directory and the next start still abandons this one's runs.
func TestIncarnation_RemadeAfterDeletion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	old, err := beginIncarnation(dir, "host1", "aaa")
	if err != nil {
		t.Fatal(err)
	}
	old.close()
	inc, err := beginIncarnation(dir, "host1", "bbb")
	if err != nil {
		t.Fatal(err)
	}
	defer inc.close()
	if !inc.intact() {
		t.Fatal("a fresh state directory is not intact")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if inc.intact() {
		t.Fatal("a deleted state directory is still intact")
	}
	// Until it is remade, the lock is free for another daemon (the name
	// registry refuses a second daemon of the same name).
	other, err := beginIncarnation(dir, "host1", "ccc")
	if err != nil {
		t.Fatalf("the deleted directory's lock should be free before it is remade: %v", err)
	}
	other.close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := inc.remake(); err != nil {
		t.Fatalf("remake: %v", err)
	}
	if !inc.intact() {
		t.Fatal("the remade state directory is not intact")
	}
	list, err := readIncarnations(filepath.Join(dir, incarnationsName))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list, []earlier{{"host1", "aaa"}, {"host1", "bbb"}}) {
		t.Errorf("remade incarnations: %v, want the unreleased earlier one and this one", list)
	}
	_, err = beginIncarnation(dir, "host1", "ddd")
	if err == nil || !strings.Contains(err.Error(), "in use by another qd daemon") {
		t.Errorf("a second daemon on the remade directory: %v, want refused", err)
	}
}
