package supervisor

import (
	"sort"
	"strconv"
	"strings"

	"github.com/qd-run/qd/lease"
)

// TokenEnv is the variable that gives a child its run's token, which proves
// the run on the daemon's socket.
const TokenEnv = "QD_RUN_TOKEN"

// WorkdirEnv names a run's fresh working directory (Spec.Workdir).
const WorkdirEnv = "QD_WORKDIR"

// allowedEnv names the daemon variables a child inherits. Anything else (the
// database URL, PG*, NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*) stays behind.
var allowedEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "TZ": true, "TMPDIR": true, "TERM": true,
}

func inherited(name string) bool {
	return allowedEnv[name] || strings.HasPrefix(name, "LC_")
}

// childEnv builds a child's environment from parent (os.Environ form): the
// allowlisted variables, then, for a run as another user, that user's
// HOME, USER and LOGNAME, then the agent's env, then the QD_ variables,
// which nothing may override; token is the run's QD_RUN_TOKEN, workdir
// its fresh working directory ($QD_WORKDIR), if any.
func childEnv(parent []string, l *lease.Lease, spec Spec, token, workdir string) []string {
	m := map[string]string{}
	for _, kv := range parent {
		if k, v, ok := strings.Cut(kv, "="); ok && inherited(k) {
			m[k] = v
		}
	}
	if u := spec.User; u != nil {
		m["HOME"], m["USER"], m["LOGNAME"] = u.Home, u.Name, u.Name
	}
	for k, v := range spec.Env {
		m[k] = v
	}
	if workdir != "" {
		m[WorkdirEnv] = workdir
	}
	m["QD_TASK_ID"] = strconv.FormatInt(l.TaskID, 10)
	m["QD_RUN_ID"] = strconv.FormatInt(l.RunID, 10)
	m["QD_LANE"] = l.Lane
	m["QD_AGENT"] = l.Agent
	m["QD_ATTEMPT"] = strconv.Itoa(l.Attempt)
	m["QD_MAX_ATTEMPTS"] = strconv.Itoa(l.MaxAttempts)
	m[TokenEnv] = token
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// InheritedEnv is what any program qd starts may take of the daemon's
// environment (os.Environ form): the allowlist children get. Notification
// commands use it too.
func InheritedEnv(parent []string) []string {
	var out []string
	for _, kv := range parent {
		if k, _, ok := strings.Cut(kv, "="); ok && inherited(k) {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}
