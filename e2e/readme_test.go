package e2e

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/localpg"
	"github.com/qd-run/qd/internal/testkit"
)

// Ensure the README's first command works as written on a machine where
// no PostgreSQL runs for qd: scripts/quickstart.sh makes and starts a
// private cluster in a fresh state directory, runs the example agents, and
// the hello task ends done with its output shown by qd logs; then the
// script stops the daemon and the cluster. As root it builds qd as the
// README says, and the cluster runs as the user qd; as an ordinary user
// (nobody, when the tests run as root) it runs the qd given in QD.
func TestReadme_QuickStart(t *testing.T) {
	qd := testkit.MustBuild(t)
	t.Run("Root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		t.Parallel()
		work := mustQuickstartDir(t, -1, -1)
		out := runQuickstart(t, filepath.Join(testkit.Root(), "scripts", "quickstart.sh"), work, nil, nil)
		checkQuickstart(t, work, out)
		if !strings.Contains(out, "user=qd&") {
			t.Errorf("as root the cluster does not run as user qd:\n%s", out)
		}
	})
	t.Run("User", func(t *testing.T) {
		t.Parallel()
		var cred *syscall.Credential
		uid, gid := -1, -1
		if os.Geteuid() == 0 {
			nobody, err := user.Lookup("nobody")
			if err != nil {
				t.Skip("no user nobody to run as")
			}
			uid, _ = strconv.Atoi(nobody.Uid)
			gid, _ = strconv.Atoi(nobody.Gid)
			cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		}
		work := mustQuickstartDir(t, uid, gid)
		bin := filepath.Join(work, "bin", "qd")
		mustCopy(t, qd, bin, uid, gid)
		// Run as another user, the script may not reach the checkout (a
		// clone in a directory only root may enter): it runs from a copy
		// of what it reads there, the script and the examples.
		repo := filepath.Join(work, "repo")
		files, _ := filepath.Glob(filepath.Join(testkit.Root(), "examples", "*"))
		files = append(files, filepath.Join(testkit.Root(), "scripts", "quickstart.sh"))
		for _, f := range files {
			rel, _ := filepath.Rel(testkit.Root(), f)
			mustCopy(t, f, filepath.Join(repo, rel), uid, gid)
		}
		out := runQuickstart(t, filepath.Join(repo, "scripts", "quickstart.sh"), work, cred, []string{"QD=" + bin, "HOME=" + work})
		checkQuickstart(t, work, out)
		if cred != nil && !strings.Contains(out, "user=nobody&") {
			t.Errorf("run as nobody, the cluster is not nobody's:\n%s", out)
		}
	})
	readme := readFile(t, filepath.Join(testkit.Root(), "README.md"))
	if first := firstCommands(readme, 2); strings.Join(first, "\n") != "scripts/quickstart.sh\nscripts/test.sh" {
		t.Errorf("the README's first two commands are %q, want the quick start and the tests", first)
	}
	for _, step := range []string{"qd run --check --config qd.hcl", "qd run --config qd.hcl &",
		`qd enqueue --agent hello --lane demo '{"name": "world"}'`, `command  = ["examples/hello.sh"]`, `periodic "greeting"`} {
		if !strings.Contains(readme, step) {
			t.Errorf("README quick start no longer has %q, which scripts/quickstart.sh runs", step)
		}
	}
}

// mustQuickstartDir makes a short work directory, owned by uid and gid
// unless they are -1, that the user of a cluster made by root may pass
// through; whatever cluster the script leaves there is stopped at the end.
func mustQuickstartDir(t *testing.T, uid, gid int) string {
	t.Helper()
	work, err := os.MkdirTemp("", "qd-qs-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o711)
	if err := os.Chown(work, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := localpg.New(filepath.Join(work, "state", "pg"), localpg.Options{}).Stop(ctx, localpg.Immediate); err != nil {
			t.Errorf("stop the quick start's cluster: %v", err)
		}
		os.RemoveAll(work)
	})
	if s := localpg.New(filepath.Join(work, "state", "pg"), localpg.Options{}).Status(); s.BinError != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(s.BinError)
		}
		t.Skip(s.BinError)
	}
	return work
}

// runQuickstart runs the script in work, as cred when not nil, with env
// added and no database named anywhere, and returns its output.
func runQuickstart(t *testing.T, script, work string, cred *syscall.Credential, env []string) string {
	t.Helper()
	cmd := exec.Command(script)
	for _, kv := range testkit.Environ() {
		if !strings.HasPrefix(kv, "QD_") && !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append(env, "QD_QUICKSTART_DIR="+work)...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart.sh: %v\n%s", err, out)
	}
	return string(out)
}

func checkQuickstart(t *testing.T, work, out string) {
	t.Helper()
	for _, want := range []string{"made a private PostgreSQL", `"state": "done"`, "said hello", `payload: {"name": "world"}`,
		"stopped the private PostgreSQL in " + work + "/state/pg"} {
		if !strings.Contains(out, want) {
			t.Errorf("quick start output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^hello +@every 2s`).MatchString(out) {
		t.Errorf("quick start output lacks qd status's hello agent:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(work, "state", "pg", "data", "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("the private cluster still runs after the quick start: %v", err)
	}
}

// firstCommands returns the first n command lines of the README's first
// sh block, comments cut.
func firstCommands(readme string, n int) []string {
	_, block, _ := strings.Cut(readme, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" && len(cmds) < n {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

func mustCopy(t *testing.T, from, to string, uid, gid int) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(to), 0o755)
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Dir(to), uid, gid)
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
			// The name ends where two spaces begin the summary: "lane set".
			name, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
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
