package config

import (
	"errors"
	"strings"
	"testing"
)

const namePattern = `^[a-z0-9][a-z0-9._-]{0,62}$`

// TestLoad_Rejects loads each fixture under testdata/<case>/qd.hcl and
// compares every problem reported, in order. {dir} stands for the absolute
// path of the fixture's directory.
func TestLoad_Rejects(t *testing.T) {
	notDur := `is not a duration: write a number with a unit, such as "30s", "5m", "1h" or "2d", or a number of seconds`
	notSize := `is not a size: write a positive number of bytes, or one with a unit K, M, G or T (powers of 1024), such as "512M"`
	loader := "may not be set: it changes how the dynamic loader loads the agent"
	badVar := "not a valid variable name (letters, digits and _, not starting with a digit)"
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"syntax", []string{
			`3:3: Missing item separator: Expected a comma to mark the beginning of the next item.`,
		}},
		{"binary", []string{
			`: not a text file: NUL byte at offset 7`,
		}},
		{"unknown", []string{
			`1:1: Unsupported argument: An argument named "log_levl" is not expected here. Did you mean "log_level"?`,
			`6:3: Unsupported argument: An argument named "paralel" is not expected here. Did you mean "parallel"?`,
			`7:3: Unsupported block type: Blocks of type "retry" are not expected here.`,
			`11:1: Unsupported block type: Blocks of type "agnet" are not expected here. Did you mean "agent"?`,
		}},
		{"types", []string{
			`2:14: agent "build": command: list of string required, but have string`,
			`4:14: agent "build": parallel: a number is required`,
			`5:14: agent "build": lanes: list of string required, but have string`,
			`6:14: agent "build": env: map of string required`,
		}},
		{"duplicates", []string{
			`11: agent "build" is defined twice, at lines 1 and 11`,
			`13: agent "build": schedule "@every 0s": the interval must be at least 1s, got "0s"`,
			`16: periodic "nightly" is defined twice, at lines 6 and 16`,
		}},
		{"durations", []string{
			`1: shutdown_grace must be positive, got "-1s"`,
			`2: retention must be positive, got "0s"`,
			`7: agent "build": lease must be positive, got "-5s"`,
			`8: agent "build": timeout "10 s" ` + notDur,
			`9: agent "build": stall_timeout must be positive, got "0s"`,
			`10: agent "build": kill_grace "soon" ` + notDur,
			`11: agent "build": retry_backoff "1d-2h" ` + notDur,
		}},
		{"heartbeat", []string{
			`5: agent "half": heartbeat 30s must be less than half the lease (1m0s), so that one late heartbeat does not lose the lease`,
			`11: agent "over": heartbeat 5m0s must be less than half the lease (5m0s), so that one late heartbeat does not lose the lease`,
			`17: agent "zero": heartbeat must be positive, got "0s"`,
		}},
		{"counts", []string{
			`4: agent "build": parallel must be between 1 and 100000, got 0`,
			`5: agent "build": max_attempts must be between 1 and 2147483647, got 0`,
			`11: agent "deploy": parallel must be between 1 and 100000, got -1`,
			`17: periodic "nightly": max_attempts must be between 1 and 2147483647, got -2`,
		}},
		{"ranges", []string{
			`4: agent "wide": parallel must be between 1 and 100000, got 2147483648`,
			`10: agent "quick": lease 10ms is shorter than 1s: a claim could not be answered and renewed in time, and every run would be given back unstarted`,
			`16: agent "chatty": heartbeat 10ms is more often than every 100ms`,
			`17: agent "chatty": env "BIG" is 143364 bytes (KEY=VALUE), longer than the 131071 bytes the kernel takes in one variable`,
			`23: periodic "nul": payload contains \u0000, which PostgreSQL cannot store`,
			`24: periodic "nul": priority must be between -2147483648 and 2147483647, got 2147483648`,
			`30: periodic "tries": max_attempts must be between 1 and 2147483647, got 2147483648`,
		}},
		{"names", []string{
			`1: agent "Build": name does not match ` + namePattern,
			`6: agent "../etc": name does not match ` + namePattern,
			`9: agent "../etc": lane "a b" does not match ` + namePattern,
			`9: agent "../etc": lane "Ü" does not match ` + namePattern,
			`9: agent "../etc": lane "lane\n" does not match ` + namePattern,
			`12: periodic "every hour": name does not match ` + namePattern,
			`15: periodic "every hour": lane "../x" does not match ` + namePattern,
		}},
		{"cron", []string{
			`3: agent "zero": schedule "@every 0s": the interval must be at least 1s, got "0s"`,
			`8: agent "negative": schedule "@every -5m": the interval must be at least 1s, got "-5m"`,
			`13: agent "subsecond": schedule "@every 500ms": the interval must be at least 1s, got "500ms"`,
			`18: agent "fraction": schedule "@every 1500ms": the interval must be a whole number of seconds, got "1500ms"`,
			`23: agent "february": schedule "0 0 30 2 *" never fires: no date in the next five years matches it`,
			`28: agent "tz-panic": schedule "TZ=0": the time zone must be followed by a space and a schedule, as in "CRON_TZ=Europe/Paris 0 9 * * *"`,
			`33: agent "mars": schedule "CRON_TZ=Mars/Base 0 9 * * *": unknown time zone "Mars/Base"`,
			`38: agent "six": schedule "0 * * * * *": expected exactly 5 fields, found 6: [0 * * * * *]`,
			`43: agent "empty": schedule "": empty spec string`,
			`48: agent "minute": schedule "61 * * * *": end of range (61) above maximum (59): 61`,
		}},
		{"command", []string{
			`2: agent "missing": command: program {dir}/missing.sh does not exist`,
			`7: agent "notexec": command: program "notexec.sh" is not found in $PATH (a name without a slash is looked up in $PATH; write "./notexec.sh" for the file in {dir})`,
			`12: agent "directory": command: program {dir}/subdir is a directory`,
			`17: agent "badshebang": command: script {dir}/badshebang.sh: interpreter /nonexistent/interp does not exist`,
			`22: agent "crlf": command: script {dir}/crlf.sh: interpreter "/bin/sh\r" ends in a carriage return (the script has Windows line endings)`,
			`27: agent "envshebang": command: script {dir}/envshebang.sh: interpreter "qd-no-such-interpreter" (run by env) is not found in $PATH`,
			`32: agent "relshebang": command: script {dir}/relshebang.sh: interpreter "sh" is not an absolute path`,
			`37: agent "notonpath": command: program "qd-no-such-program" is not found in $PATH`,
			`42: agent "empty": command must name a program`,
			`47: agent "blank": command must name a program`,
			`52: agent "nul": command argument "echo a\x00b" contains a NUL byte`,
			`58: agent "indir": command: program {dir}/sub2/ok.sh does not exist`,
			`68: agent "notexec-path": command: program {dir}/notexec.sh is not executable (mode 0644)`,
		}},
		{"output", []string{
			`4: agent "mixed": output "interleaved" is not one of separate, merged`,
		}},
		{"limits", []string{
			`4: agent "build": memory_max "lots" ` + notSize,
			`5: agent "build": cpu_max is a number of CPUs, more than 0 and at most 4096 (such as 0.5 or 2), got 0`,
			`11: agent "big": memory_max "-1G" ` + notSize,
			`12: agent "big": cpu_max is a number of CPUs, more than 0 and at most 4096 (such as 0.5 or 2), got 5000`,
		}},
		{"ratelimits", []string{
			`2: limit "llm": rate "abc" is not UNITS/PERIOD, such as "60/1m"`,
			`5: limit "zero": rate "0/1m": the units must be a whole number from 1 to 2147483647, such as "60/1m"`,
			`8: limit "instant": rate "5/0s": the period must be a duration from 1ms to 8784h0m0s, such as "1m"`,
			`9: limit "instant": burst is how many units may be taken beyond the steady rate, from 0 to 2147483647, got -1`,
			`14: agent "x": limit "nosuch" is not declared: add a limit "nosuch" { rate = "60/1m" } block`,
		}},
		{"budgets", []string{
			`2: budget "neg": max is what the agents may spend in a period, from 0 to 1e+15, got -1`,
			`7: budget "odd": period "2d" is not one of 1h, 1d, 1w, 1mo`,
			`8: budget "odd": timezone "Mars/Olympus" is not a time zone this host knows (such as "Europe/Paris")`,
			`13: agent "x": budget "nosuch" is not declared: add a budget "nosuch" { max = 5.00  period = "1d" } block`,
		}},
		{"box", []string{
			`6: agent "who": user "qd-no-such-user" is not a user of this host (user: unknown user qd-no-such-user): create it (useradd --system qd-no-such-user) or name another`,
			`12: agent "grouponly": group needs user: name the user the agent runs as, and group for a group other than that user's own`,
			`19: agent "work": workdir and dir both set the runs' working directory: keep one`,
			`20: agent "work": keep_workdir "sometimes" is not one of never, failed, always`,
			`26: agent "work2": workdir "new": its one value is "fresh", a new empty directory for each run under state_dir/work; for a directory of your own, set dir`,
			`27: agent "work2": keep_workdir needs workdir = "fresh": only a directory qd made for the run is removed or kept`,
			`34: agent "paths" sandbox: read path / is the whole file system, the daemon's own files too: list the directories the agent needs`,
			`34: agent "paths" sandbox: read path {dir}/missing does not exist: a box shows only what exists; create it first, or remove it from read`,
			`35: agent "paths" sandbox: write path {dir}/out does not exist: a box shows only what exists; create it first, or remove it from write`,
			`43: agent "nets" sandbox: network "offline" is neither of its forms: "host" (the default), "none" (no network, a loopback of its own), or a list of the TCP ports runs may connect to, such as ["443", "5432"]`,
			`51: agent "ports" sandbox: network port "http" is not a TCP port: write a number from 1 to 65535`,
			`59: agent "noports" sandbox: network = [] lists no port: for no network at all, write network = "none"`,
			`67: agent "state" sandbox: read path {dir} overlaps the daemon's state directory {dir}/state, which a box never shows (it holds every run's output); list directories beside it`,
			`70: agent "state": sandbox is defined twice, at lines 66 and 70`,
			`77: agent "statedir" sandbox: dir path {dir}/state overlaps the daemon's state directory {dir}/state, which a box never shows (it holds every run's output); list directories beside it`,
		}},
		{"dir", []string{
			`4: agent "missing": dir {dir}/nowhere does not exist`,
			`10: agent "file": dir {dir}/afile is not a directory`,
		}},
		{"env", []string{
			`5: agent "build": env "LD_PRELOAD": ` + loader,
			`6: agent "build": env "LD_LIBRARY_PATH": ` + loader,
			`7: agent "build": env "DYLD_INSERT_LIBRARIES": ` + loader,
			`8: agent "build": env "NOTIFY_SOCKET": may not be set: it belongs to systemd and qd`,
			`9: agent "build": env "QD_TASK_ID": may not be set: QD_ variables are set by qd for each run`,
			`10: agent "build": env "A=B": ` + badVar,
			`11: agent "build": env "NUL\x00KEY": ` + badVar,
			`12: agent "build": env "9LIVES": ` + badVar,
			`13: agent "build": env "VALUE_NUL": the value contains a NUL byte`,
			`15: agent "build": env key "GOOD" is set twice, at lines 14 and 15`,
		}},
		{"periodic", []string{
			`16: periodic "badjson": payload is not valid JSON: invalid character '}' looking for beginning of object key string`,
			`23: periodic "catchup": catch_up "all" is not one of skip, once`,
			`29: periodic "offlane": lane "other" is not among the lanes of agent "build" ([ci nightly]), so its tasks would never run`,
			`32: periodic "defaultlane": lane "default" is not among the lanes of agent "build" ([ci nightly]), so its tasks would never run`,
			`41:14: periodic "priority": priority: a number is required`,
		}},
		{"required", []string{
			`1: agent "build": command is required: a list of the program and its arguments, such as ["/usr/local/bin/build", "--fast"]`,
			`1: agent "build": schedule is required (a cron expression such as "*/5 * * * *", or "@every 30s")`,
			`5: periodic "nightly": schedule is required (a cron expression such as "*/5 * * * *", or "@every 30s")`,
			`5: periodic "nightly": agent is required: the name of an agent block that runs the tasks`,
		}},
		{"toplevel", []string{
			`1: name "host\tone" must be non-empty, printable and at most 200 bytes`,
			`2: log_level "loud" is not one of trace, debug, info, warn, error`,
			`3: log_format "xml" is not one of text, json`,
			`5: state_dir "~qd/state": only ~ and ~/ (this user's home) are expanded, not another user's; write the full path`,
			`10: agent "build": dir is empty: leave it out for the default`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Ensure each problem is reported at its line, none is missed
			// and nothing else is reported.
			path := "testdata/" + tt.name + "/qd.hcl"
			dir := MustAbs(t, "testdata/"+tt.name)
			c, err := Load(path)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got config %+v and error %v, want an *Error", c, err)
			}
			var got []string
			for _, p := range cerr.Problems {
				got = append(got, p.String())
			}
			var want []string
			for _, w := range tt.want {
				if !strings.HasPrefix(w, ":") {
					w = ":" + w
				}
				want = append(want, path+strings.ReplaceAll(w, "{dir}", dir))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if err.Error() != strings.Join(want, "\n") {
				t.Fatalf("Error() is not the problems one a line:\n%s", err)
			}
		})
	}
}
