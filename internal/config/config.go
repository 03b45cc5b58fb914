package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/robfig/cron/v3"

	"github.com/qd-run/qd/lease"
)

// Defaults of the settings a file may leave out.
const (
	DefaultLogLevel      = "info"
	DefaultLogFormat     = "text"
	DefaultShutdownGrace = 30 * time.Second
	DefaultParallel      = 1
	DefaultLease         = lease.DefaultLease
	DefaultKillGrace     = lease.DefaultKillGrace
	DefaultRetryBackoff  = lease.DefaultBackoffBase
	DefaultMaxAttempts   = lease.DefaultMaxAttempts
	DefaultMaxDeferrals  = lease.DefaultMaxDeferrals
	DefaultCatchUp       = CatchUpSkip
	DefaultOverlap       = OverlapSkip
)

// What a periodic schedule does at a tick while a task it enqueued is still
// queued or running (its lane paused, claims held, its agent slow).
const (
	OverlapSkip  = "skip"  // enqueue nothing: the task already waiting is the tick's
	OverlapQueue = "queue" // enqueue another all the same
)

// Ranges of an agent's settings that a daemon can honour: a claim takes at
// most MaxParallel tasks at once, a lease shorter than MinLease cannot be
// claimed and renewed over a network, a heartbeat more often than
// MinHeartbeat costs the database more than it buys, and the kernel
// refuses to start a program with one argument or variable longer than
// MaxArgBytes (128 KiB with its NUL), or with MaxExecBytes of them in all
// (a quarter of the usual 8 MiB stack, less what the daemon's own
// environment takes).
const (
	MaxParallel  = 100_000
	MinLease     = time.Second
	MinHeartbeat = 100 * time.Millisecond
	MaxArgBytes  = 128<<10 - 1
	MaxExecBytes = 1 << 20
)

// What a periodic schedule does about ticks missed while no daemon ran.
const (
	CatchUpSkip = "skip" // log each missed tick and enqueue nothing for it
	CatchUpOnce = "once" // enqueue one task for all missed ticks together
)

// Config is a validated configuration. Durations left out of the file hold
// their defaults; zero means "none" only where a field says so.
type Config struct {
	Path          string        // absolute path of the file; "" for Default
	Database      string        // may be empty: --db or QD_DATABASE_URL then
	Name          string        // supervisor name; the host name by default
	Socket        string        // status socket path
	StateDir      string        // run logs and process records
	LogLevel      string        // trace, debug, info, warn or error
	LogFormat     string        // text or json
	ShutdownGrace time.Duration // how long a stop waits for children
	Retention     time.Duration // 0: keep finished tasks forever
	Agents        []Agent       // sorted by name
	Periodics     []Periodic    // sorted by name
	Lanes         []Lane        // sorted by name
	RateLimits    []RateLimit   // the limit blocks, sorted by name
	Budgets       []Budget      // the budget blocks, sorted by name
	Notify        Notify        // the default of the agents' notifications
	NotifyRetry   NotifyRetry   // how hard notifications are tried
	UI            *UI           // the ui block; nil when there is none
	// Warnings are what is valid but likely a mistake; see warnings.
	Warnings []Problem

	file       string // the file's name as it was given, for CheckHost's problems
	socketLine int    // of the socket setting; 0 when it is the default
}

// Agent is one agent "NAME" block: a program the daemon runs for each task
// of that agent it claims.
type Agent struct {
	Name         string
	Command      []string          // program (absolute path) and arguments
	Dir          string            // working directory; "" keeps qd's
	Env          map[string]string // added to the child's environment
	Schedule     string            // as written
	Sched        cron.Schedule     // Schedule, parsed
	Lanes        []string          // empty: any lane
	Parallel     int               // children at once
	Lease        time.Duration
	Heartbeat    time.Duration // less than Lease/2
	Timeout      time.Duration // 0: none
	StallTimeout time.Duration // 0: none
	KillGrace    time.Duration // SIGTERM to SIGKILL
	RetryBackoff time.Duration // base of the exponential backoff; the delay of a bare exit 75
	MaxDeferrals int           // deferrals of a task before a deferral fails the run
	MaxAttempts  int           // for tasks its periodics enqueue
	// MemoryMax (bytes) and CPUMax (CPUs) bound each run's cgroup; zero:
	// no bound.
	MemoryMax int64
	CPUMax    float64
	// Limits are the rate limits each of its runs takes a unit of at its
	// claim (limit blocks of the file).
	Limits []string
	// Budget is the budget block its runs spend from; "" for none.
	Budget    string
	Notify    Notify    // whom to tell when its tasks fail; the top level's by default
	DeclRange hcl.Range // the block header, for later messages

	// User is who its runs run as; nil: the daemon's user.
	User *User
	// Workdir is WorkdirFresh for a new empty directory for each run, ""
	// for Dir's meaning; KeepWorkdir (KeepNever, KeepFailed, KeepAlways;
	// "" without Workdir) says when that directory stays after its run.
	Workdir, KeepWorkdir string
	// Sandbox is its sandbox block; nil without one.
	Sandbox *Sandbox
	// Output is OutputSeparate or OutputMerged: whether the child's stdout
	// and stderr share one pipe, and so keep their order in the log.
	Output string

	// Timetable is when a task of the agent is enqueued, one at each tick,
	// as a periodic block of the agent's name would: the one line for "run
	// this agent on this timetable". Empty: none.
	Timetable string

	memoryLine, cpuLine int // of memory_max and cpu_max, for CheckHost
	userLine, dirLine   int // of user and dir, for CheckHost and boxes
	timetable           cron.Schedule
	timetableLine       int
}

// Periodic is one periodic "NAME" block: a task enqueued on a schedule.
type Periodic struct {
	Name        string
	Schedule    string
	Sched       cron.Schedule
	Agent       string
	Lane        string
	Payload     string // JSON text
	Priority    int
	CatchUp     string // CatchUpSkip or CatchUpOnce
	Overlap     string // OverlapSkip or OverlapQueue
	MaxAttempts int
	DeclRange   hcl.Range
}

// Pos returns "file:line" of the agent's block.
func (a *Agent) Pos() string { return pos(a.DeclRange) }

// Pos returns "file:line" of the periodic's block.
func (p *Periodic) Pos() string { return pos(p.DeclRange) }

func pos(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// Agent returns the agent named name, or nil.
func (c *Config) Agent(name string) *Agent {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i]
		}
	}
	return nil
}

// Periodic returns the periodic schedule named name, or nil.
func (c *Config) Periodic(name string) *Periodic {
	for i := range c.Periodics {
		if c.Periodics[i].Name == name {
			return &c.Periodics[i]
		}
	}
	return nil
}

// Default returns the configuration used when there is no file: no agents,
// and the defaults of the environment qd runs in.
func Default() *Config {
	return defaults(os.Getenv, os.Getuid())
}

func defaults(getenv func(string) string, uid int) *Config {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "qd"
	}
	return &Config{
		Name:          name,
		Socket:        defaultSocket(getenv, uid),
		StateDir:      defaultStateDir(getenv, uid),
		LogLevel:      DefaultLogLevel,
		LogFormat:     DefaultLogFormat,
		ShutdownGrace: DefaultShutdownGrace,
	}
}

// defaultSocket puts root's socket in /run/qd whether or not the shell has
// an XDG_RUNTIME_DIR, so that root's qd status finds the system service; the
// service's own user finds it too, when the socket there is theirs.
func defaultSocket(getenv func(string) string, uid int) string {
	if uid == 0 {
		return serviceSocket
	}
	if dir := getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "qd", "qd.sock")
	}
	if getenv("INVOCATION_ID") != "" || ownSocket(serviceSocket, uid) {
		// Run by systemd, or the service's own user in a shell
		// (`sudo -u qd qd status`): the unit's socket.
		return serviceSocket
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("qd-%d", uid), "qd.sock")
}

// serviceSocket is the socket of the systemd unit (RuntimeDirectory=qd).
const serviceSocket = "/run/qd/qd.sock"

// ownSocket reports whether path is a socket that uid owns.
func ownSocket(path string, uid int) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

func defaultStateDir(getenv func(string) string, uid int) string {
	if dir := getenv("STATE_DIRECTORY"); dir != "" {
		first, _, _ := strings.Cut(dir, ":") // systemd lists several with ':'
		return first
	}
	if uid == 0 {
		return "/var/lib/qd"
	}
	if dir := getenv("XDG_STATE_HOME"); dir != "" {
		return filepath.Join(dir, "qd")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return filepath.Join(os.TempDir(), fmt.Sprintf("qd-%d", uid), "state")
	}
	return filepath.Join(home, ".local", "state", "qd")
}

// Source names where c came from: its file, or "defaults".
func (c *Config) Source() string {
	if c.Path == "" {
		return "defaults"
	}
	return c.Path
}
