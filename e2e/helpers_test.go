package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// taskField reads a field of `qd show --json` output, whether the task is
// at the top level or under "task".
func taskField(show map[string]any, key string) string {
	if t, ok := show["task"].(map[string]any); ok {
		return fmt.Sprint(t[key])
	}
	return fmt.Sprint(show[key])
}
