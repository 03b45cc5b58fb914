package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// Ensure docs/cli.md documents qdbench under its usage line, with every
// flag it has.
func TestDocs_ListEveryFlag(t *testing.T) {
	src, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	head := "#### `" + usage + "`\n"
	_, section, ok := strings.Cut(string(src), head)
	if !ok {
		t.Fatalf("docs/cli.md has no heading %q", head)
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	var c Command
	c.flagSet().VisitAll(func(f *flag.Flag) {
		if !strings.Contains(section, "`--"+f.Name) {
			t.Errorf("docs/cli.md does not document qdbench --%s", f.Name)
		}
	})
}
