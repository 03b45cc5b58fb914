// Command testreport is the test command's reporter: it reads the events of
// `go test -json` on stdin and prints what `go test` prints (a line per
// package, the output of what failed), then, last, every skipped test by
// package with the reason it gave, so that a green run cannot hide a suite
// that did not run. With -check-db it checks first that the test database
// answers, and fails with one line saying how to start one unless
// QD_TEST_SKIP_DB=1.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
)

func main() {
	checkDB := flag.Bool("check-db", false, "only check that the test database answers")
	flag.Parse()
	if *checkDB {
		os.Exit(checkDatabase(os.Stderr))
	}
	os.Exit(report(os.Stdin, os.Stdout))
}

// checkDatabase returns 0 when the test database answers or the tests are
// told to skip what needs it, else says how to get one and returns 1.
func checkDatabase(w io.Writer) int {
	u := os.Getenv("QD_TEST_DATABASE_URL")
	if u == "" {
		u = testkit.DefaultDatabaseURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err == nil {
		conn.Close(ctx)
		return 0
	}
	if os.Getenv("QD_TEST_SKIP_DB") == "1" {
		fmt.Fprintf(w, "test: no database at %s; QD_TEST_SKIP_DB=1, so the tests that need one are skipped (listed at the end)\n", lease.Redact(u))
		return 0
	}
	fmt.Fprintf(w, "test: no PostgreSQL answers at %s (%s): start one (Debian: pg_ctlcluster 15 main start; or set QD_TEST_DATABASE_URL), or set QD_TEST_SKIP_DB=1 to skip the tests that need it\n",
		lease.Redact(u), strings.Join(strings.Fields(err.Error()), " "))
	return 1
}

// event is one line of go test -json.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type skip struct{ test, reason string }

// report turns the events on r into go test's own output on w, then the
// skipped tests, and returns 1 when anything failed.
func report(r io.Reader, w io.Writer) int {
	out := map[string][]string{} // package and test → output held back
	skips := map[string][]skip{}
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(w, sc.Text()) // not an event: the go command's own words
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			out[key] = append(out[key], e.Output)
		case "skip":
			if e.Test != "" {
				skips[e.Package] = append(skips[e.Package], skip{e.Test, skipReason(out[key])})
			} else {
				fmt.Fprintf(w, "?   \t%s\t[no test files]\n", e.Package)
			}
			delete(out, key)
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(w, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
			delete(out, key)
		case "fail", "build-fail":
			failed = true
			fmt.Fprint(w, strings.Join(out[key], ""))
			delete(out, key)
		}
	}
	for _, lines := range out { // a package cut short: a panic, a timeout
		fmt.Fprint(w, strings.Join(lines, ""))
	}
	writeSkips(w, skips)
	if failed {
		return 1
	}
	return 0
}

var logPrefix = regexp.MustCompile(`^\s*\S+\.go:\d+: `)

// skipReason is what a skipped test said: its output without the lines go
// test adds itself.
func skipReason(lines []string) string {
	var said []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		said = append(said, logPrefix.ReplaceAllString(strings.TrimRight(l, "\n"), ""))
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, "; ")
}

// writeSkips lists the skipped tests of each package, with their reasons.
func writeSkips(w io.Writer, skips map[string][]skip) {
	total := 0
	pkgs := make([]string, 0, len(skips))
	for p, s := range skips {
		pkgs = append(pkgs, p)
		total += len(s)
	}
	sort.Strings(pkgs)
	fmt.Fprintf(w, "\nskipped tests: %d\n", total)
	for _, p := range pkgs {
		fmt.Fprintf(w, "  %s: %d\n", p, len(skips[p]))
		for _, s := range skips[p] {
			fmt.Fprintf(w, "    %s: %s\n", s.test, s.reason)
		}
	}
}
