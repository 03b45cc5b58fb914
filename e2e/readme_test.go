package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure the README's quick start works as written: scripts/quickstart.sh
// runs its commands against a fresh database schema and the hello task ends
// done, with its output shown by qd logs.
func TestReadme_QuickStart(t *testing.T) {
	t.Parallel()
	qd := testkit.MustBuild(t)
	db, _ := testkit.MustSchema(t)
	work := testkit.MustShortDir(t, "qd-qs-")
	cmd := exec.Command(filepath.Join(testkit.Root(), "scripts", "quickstart.sh"))
	cmd.Env = append(os.Environ(), "QD="+qd, "QD_DATABASE_URL="+db, "QD_QUICKSTART_DIR="+work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart.sh: %v\n%s", err, out)
	}
	for _, want := range []string{`"state": "done"`, "said hello", `payload: {"name": "world"}`, "hello  @every 2s"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("quick start output lacks %q:\n%s", want, out)
		}
	}
	readme := readFile(t, filepath.Join(testkit.Root(), "README.md"))
	for _, step := range []string{"qd migrate", "qd run --check --config qd.hcl", "qd run --config qd.hcl &",
		`qd enqueue --agent hello --lane demo '{"name": "world"}'`, `command  = ["examples/hello.sh"]`} {
		if !strings.Contains(readme, step) {
			t.Errorf("README quick start no longer has %q, which scripts/quickstart.sh runs", step)
		}
	}
}

// Ensure the README lists exactly the commands `qd help` lists.
func TestReadme_CommandsMatchHelp(t *testing.T) {
	qd := testkit.MustBuild(t)
	out, err := exec.Command(qd, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("qd help: %v\n%s", err, out)
	}
	var help []string
	inCommands := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Commands:"):
			inCommands = true
		case inCommands && strings.HasPrefix(line, "  "):
			f := strings.Fields(line)
			name := f[0]
			if len(f) > 1 && (name == "lane" || name == "db") {
				name += " " + f[1]
			}
			help = append(help, name)
		case inCommands && strings.TrimSpace(line) == "":
			inCommands = len(help) == 0
		}
	}
	readme := readFile(t, filepath.Join(testkit.Root(), "README.md"))
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `qd ([a-z][a-z-]*(?: [a-z]+)?)` \\|").FindAllStringSubmatch(readme, -1) {
		listed = append(listed, m[1])
	}
	sort.Strings(help)
	sort.Strings(listed)
	if strings.Join(help, ",") != strings.Join(listed, ",") || len(help) == 0 {
		t.Fatalf("qd help lists %q\nREADME lists %q", help, listed)
	}
}
