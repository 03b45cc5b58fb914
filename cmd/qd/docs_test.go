package main

import (
	"os"
	"regexp"
	"testing"
)

// Ensure docs/cli.md documents every command qd has, and no command qd
// lacks.
func TestDocs_ListEveryCommand(t *testing.T) {
	src, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^#### `qd ([a-z][a-z-]*(?: (?:set|list|start|status|stop|install|uninstall|pause|resume))?)").FindAllSubmatch(src, -1) {
		documented[string(m[1])] = true
	}
	for _, c := range commands {
		if !documented[c.name] {
			t.Errorf("docs/cli.md does not document qd %s", c.name)
		}
		delete(documented, c.name)
	}
	for name := range documented {
		t.Errorf("docs/cli.md documents qd %s, which does not exist", name)
	}
}
