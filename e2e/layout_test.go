package e2e

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path prefix of qd's packages.
const module = "github.com/qd-run/qd/"

// Ensure the import rules of docs/architecture.md hold for every package
// of the module (tests aside): the domain imports no backend; only backend
// (and the bench) imports pg; supervisor and scheduler see only the lease
// interface; the config imports neither the supervisor nor the socket
// API; only the commands import daemon; the socket API and the private
// cluster import nothing of qd but the domain; nothing imports a command,
// and the qd binary does not link the benchmark.
func TestLayout_Imports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(imp, module))
			}
		}
		if _, ok := imports[pkg]; !ok {
			imports[pkg] = nil
		}
	}
	allowed := map[string][]string{
		"lease":              {},
		"lease/memlease":     {"lease"},
		"lease/leasetest":    {"lease"},
		"pg":                 {"lease"},
		"backend":            {"lease", "pg"},
		"api":                {"lease"},
		"internal/box":       {},
		"internal/config":    {"lease"},
		"internal/logsink":   {},
		"internal/localpg":   {},
		"internal/testkit":   {"api", "lease"},
		"notify":             {"lease"},
		"metrics":            {"lease"},
		"supervisor":         {"internal/box", "lease"},
		"scheduler":          {"lease"},
		"ui":                 {"lease", "api"},
		"daemon":             {"api", "internal/box", "internal/config", "internal/logsink", "lease", "metrics", "notify", "scheduler", "supervisor", "ui"},
		"cmd/qd":             {"api", "backend", "daemon", "internal/box", "internal/config", "internal/localpg", "lease", "metrics", "supervisor", "systemd", "ui"},
		"systemd":            {},
		"cmd/qdbench":        {"bench"},
		"bench":              {"api", "internal/localpg", "lease", "pg"},
		"model":              {},
		"scripts/testreport": {"internal/testkit", "lease"},
		"e2e":                {},
		"faults":             {},
		"faults/fakeagent":   {},
	}
	for pkg := range imports {
		if _, ok := allowed[pkg]; !ok {
			t.Errorf("package %s is not in the table of what each package may import: add it, and to docs/architecture.md", pkg)
		}
	}
	for pkg, may := range allowed {
		got, ok := imports[pkg]
		if !ok {
			t.Errorf("package %s not found", pkg)
		}
		for _, imp := range got {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s; docs/architecture.md allows only %v", pkg, imp, may)
			}
			switch {
			case imp == "pg" && pkg != "backend" && pkg != "bench":
				t.Errorf("%s imports pg: only backend opens it (and the bench measures it)", pkg)
			case imp == "daemon" && !strings.HasPrefix(pkg, "cmd/"):
				t.Errorf("%s imports daemon: only the commands may", pkg)
			case pkg == "internal/config" && (imp == "supervisor" || imp == "api"):
				t.Errorf("internal/config imports %s: the config asks the host nothing (config.Host is passed in)", imp)
			}
		}
	}
	for pkg, imps := range imports {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "cmd/") {
				t.Errorf("%s imports the command %s", pkg, imp)
			}
		}
	}
	pgimports, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "../internal/localpg").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(pgimports), "jackc/pgx") {
		t.Error("internal/localpg imports a database driver; it runs the PostgreSQL binaries and reads their files")
	}
	deps, err := exec.Command("go", "list", "-deps", "../cmd/qd").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if strings.Contains(string(deps), module+"bench\n") {
		t.Error("the qd binary links package bench")
	}
}

// Ensure qd builds for macOS, where it runs under launchd: the cgroup,
// box and pidfd code has Linux files and others, and a field used beside
// the Linux one alone breaks only that build. (The tests themselves are
// Linux's.)
func TestLayout_BuildsForMacOS(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "build", "../...")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("GOOS=darwin GOARCH=arm64 go build ./...: %v\n%s", err, out)
	}
}
