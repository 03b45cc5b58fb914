package api

import (
	"strings"
	"time"
)

// Snapshot is what the status socket serves at GET /v1/status: a copy of
// the daemon's state taken at one moment. Every field is a value, so a
// Snapshot can be encoded and rendered without touching the daemon again.
//
// Durations named *_seconds are computed by the daemon when it builds the
// snapshot. Those that concern leases (lease_left_seconds, silent_seconds)
// are the daemon's own view on its monotonic clock, never a comparison of
// the host clock with a database timestamp; see LiveRun.
//
// Runs, agents' last outcomes and periodics are facts (facts.go), printed
// alike wherever qd prints them, and never leave a field out. The
// snapshot's own fields are left out where they do not apply, as each
// says.
type Snapshot struct {
	Supervisor    string         `json:"supervisor"`
	Version       string         `json:"version"`
	PID           int            `json:"pid"`
	StartedAt     time.Time      `json:"started_at"`
	UptimeSeconds float64        `json:"uptime_seconds"`
	Database      DatabaseStatus `json:"database"`
	Agents        []AgentStatus  `json:"agents"`
	Runs          []LiveRun      `json:"runs"`
	// RunsTotal counts the live runs; Runs lists all of them, or the
	// oldest as many as the request asked for (GET /v1/status?runs=N).
	RunsTotal int          `json:"runs_total"`
	Lanes     []LaneStatus `json:"lanes"`
	// Limits and Budgets are the rate limits and budgets the daemon's
	// agents use, with their state (docs/limits.md).
	Limits  []Limit  `json:"limits"`
	Budgets []Budget `json:"budgets"`
	// ConfigError is the error of the last failed reload, empty when the
	// configuration in force is the one last read.
	ConfigError string `json:"config_error,omitempty"`
	// LogLinesDropped counts the daemon's log lines dropped because its log
	// output (stderr) was not being read; the daemon never waits for it.
	LogLinesDropped uint64 `json:"log_lines_dropped"`
	// StateDir is the daemon's state directory and whether writes to it
	// (run logs) are failing.
	StateDir StateDirStatus `json:"state_dir"`
	// Periodics are the config's periodic schedules.
	Periodics []Periodic `json:"periodics"`
	// DrainingSince is when the daemon began to drain (a SIGTERM): it
	// claims nothing more. Absent while it runs normally.
	DrainingSince time.Time `json:"draining_since,omitzero"`
	// Notifications counts what the daemon has told since it started.
	Notifications NotifyCounts `json:"notifications"`
	// Unserved counts the queued tasks, by agent, that no living daemon
	// sharing the queue runs: they wait until one does.
	Unserved []UnservedAgent `json:"unserved"`
	// Containment says how the daemon holds each run's processes together.
	Containment ContainmentStatus `json:"containment"`
	// StartsHeld is set while children cannot be started for want of the
	// daemon's own resources, and until one starts again; absent otherwise.
	StartsHeld *StartsHeld `json:"starts_held,omitempty"`
	// StartCaps lists the limits (open files, processes, the kernel's
	// process ids, the cgroup's pids and memory) that let the daemon hold fewer children at once
	// than its agents' parallel adds up to; absent when none does.
	StartCaps []StartCap `json:"start_caps,omitempty"`
}

// StartCap is one limit that caps how many children can start: its name
// ("RLIMIT_NOFILE", "RLIMIT_NPROC", "kernel.pid_max", "pids.max",
// "memory.max"), its value,
// about how many children it allows at once (those live included), and
// how many the agents' parallel asks for.
type StartCap struct {
	Limit    string `json:"limit"`
	Value    int64  `json:"value"`
	Children int    `json:"children"`
	Wanted   int    `json:"wanted"`
}

// StartsHeld says that the daemon could not start children for want of
// its own resources (too many open files, no memory, no processes left):
// it gave the runs back unstarted, their attempts refunded, and claims
// nothing until Until, backing off while starts keep failing.
type StartsHeld struct {
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Reason    string    `json:"reason"`
	GivenBack int       `json:"given_back"`
}

// ContainmentStatus is how a daemon contains its runs: Kind "cgroup" (each
// run in a cgroup of its own under Cgroup, killed whole, setsid or not) or
// "process group" (a grandchild that calls setsid escapes; Reason says
// why there are no cgroups). Controllers are those of cpu and memory that
// each run's cgroup has (cpu_max, memory_max and the memory peak need
// them); Reason also names those missing.
type ContainmentStatus struct {
	Kind        string   `json:"kind"`
	Cgroup      string   `json:"cgroup,omitempty"`
	Controllers []string `json:"controllers"`
	Reason      string   `json:"reason,omitempty"`
}

// NotifyCounts counts the notifications this daemon sent, failed for good
// and retried (failed tries to be tried again), and lists the targets
// whose last try failed.
type NotifyCounts struct {
	Sent    uint64       `json:"sent"`
	Failed  uint64       `json:"failed"`
	Retried uint64       `json:"retried"`
	Down    []NotifyDown `json:"down,omitempty"`
}

// NotifyDown is a notification target whose last try failed: since when
// (its first failed try since it last answered), how many tries failed,
// and what the last one said. A webhook is named redacted.
type NotifyDown struct {
	Target string    `json:"target"`
	Since  time.Time `json:"since"`
	Fails  int       `json:"failed_tries"`
	Error  string    `json:"error"`
}

// UnservedAgent is an agent with queued tasks that no living daemon runs.
type UnservedAgent struct {
	Agent  string `json:"agent"`
	Queued int    `json:"queued"`
}

// StateDirStatus reports the state directory. WriteError is the last
// failed write of a run log (a full disk, say), empty once a later run's
// log was written whole; IncompleteLogs counts the runs whose log file
// lacks output since the daemon started (their output tail is on the run
// row).
type StateDirStatus struct {
	Path           string    `json:"path"`
	WriteError     string    `json:"write_error,omitempty"`
	WriteErrorAt   time.Time `json:"write_error_at,omitzero"`
	IncompleteLogs int       `json:"incomplete_logs"`
	// Lost says the directory was deleted under the running daemon, when,
	// and whether the daemon remade it; empty when it never was.
	Lost string `json:"lost,omitempty"`
}

// DatabaseStatus says whether the daemon's last contact with the database
// succeeded.
type DatabaseStatus struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// ServerChangedAt is when a new connection last found another server
	// or database than before (a failover, a restored copy; a restart of
	// the same server is no change), ServerChange why, and
	// ClaimsHeldUntil when the daemon claims again after it; all absent
	// when the server never changed.
	ServerChangedAt time.Time `json:"server_changed_at,omitzero"`
	ServerChange    string    `json:"server_change,omitempty"`
	ClaimsHeldUntil time.Time `json:"claims_held_until,omitzero"`
}

// AgentStatus describes one configured agent. NextTick is absent when the
// schedule has no next tick.
type AgentStatus struct {
	Name     string    `json:"name"`
	Schedule string    `json:"schedule"`
	NextTick time.Time `json:"next_tick,omitzero"`
	Running  int       `json:"running"`
	Parallel int       `json:"parallel"`
	// Lanes are the lanes the agent serves; empty when it serves any.
	Lanes []string `json:"lanes"`
	// Last is how the agent's last run on this daemon ended; absent before
	// one did.
	Last *LastOutcome `json:"last,omitempty"`
	// Box is who its runs run as, where they work and what keeps them in
	// (docs/sandbox.md); absent for an agent whose runs run as the daemon
	// does.
	Box *BoxStatus `json:"box,omitempty"`
	// Paused says when and by whom the agent was paused in the queue (qd
	// agent pause): no daemon claims its tasks. Absent when it is not, or
	// the queue did not answer.
	Paused *AgentPause `json:"paused,omitempty"`
}

// BoxStatus is what is in force for an agent's runs: the user they run
// as ("nobody (uid 65534, gid 65534)"; absent: the daemon's), their
// workdir ("fresh", or "fresh, kept: failed"; absent: the agent's dir)
// and their sandbox (absent: none).
type BoxStatus struct {
	User    string         `json:"user,omitempty"`
	Workdir string         `json:"workdir,omitempty"`
	Sandbox *SandboxStatus `json:"sandbox,omitempty"`
}

// SandboxStatus is an agent's sandbox: the paths its runs may read and
// write besides the system's, their network ("host", "none" or "TCP
// ports 443, 5432"), and what the box is made of on this host
// ("Landlock ABI 7, mount and network namespaces, no_new_privs, no
// capabilities" for network "none").
type SandboxStatus struct {
	Read     []string `json:"read"`
	Write    []string `json:"write"`
	Network  string   `json:"network"`
	Enforced string   `json:"enforced"`
}

// Text says b in one line, as `qd status` and the dashboard show it.
func (b *BoxStatus) Text() string {
	var parts []string
	if b.User != "" {
		parts = append(parts, "as "+b.User)
	}
	if b.Workdir != "" {
		parts = append(parts, "workdir "+b.Workdir)
	}
	if s := b.Sandbox; s != nil {
		t := "sandbox: network " + s.Network
		if len(s.Read) > 0 {
			t += ", read " + strings.Join(s.Read, " ")
		}
		if len(s.Write) > 0 {
			t += ", write " + strings.Join(s.Write, " ")
		}
		parts = append(parts, t+" ("+s.Enforced+")")
	}
	return strings.Join(parts, "; ")
}

// LaneStatus describes one lane's limit and queue depth.
type LaneStatus struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"`
	Paused     bool   `json:"paused"`
	Running    int    `json:"running"`
	Queued     int    `json:"queued"`
	// OldestQueuedAgeSeconds is the age of the oldest task waiting in the
	// lane, zero when none waits.
	OldestQueuedAgeSeconds float64 `json:"oldest_queued_age_seconds"`
}
