package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/box"
	"github.com/qd-run/qd/lease"
)

// PipeGrace is how long output is still read after a child exits, for
// grandchildren that hold its pipes; then the rest of its group is killed.
const PipeGrace = 2 * time.Second

// ErrShuttingDown: Start was called after Drain began.
var ErrShuttingDown = errors.New("supervisor is shutting down")

// Spec says how to run one claimed task: the agent's settings.
type Spec struct {
	Agent   string
	Command []string // program and arguments
	Dir     string
	Env     map[string]string
	// Lease is the lease each heartbeat asks for (lease.DefaultLease when
	// zero); Heartbeat the interval between them (a third of the lease
	// when zero or not shorter than the lease).
	Lease, Heartbeat time.Duration
	// Timeout and StallTimeout (no output for that long) abandon the run;
	// zero means none. KillGrace separates SIGTERM from SIGKILL.
	Timeout, StallTimeout, KillGrace time.Duration
	// RetryBackoff is the base of the backoff after a failed attempt, and
	// the delay of a deferral (ExitDefer) that named none.
	RetryBackoff time.Duration
	// MaxDeferrals caps the deferrals of a task (lease.DefaultMaxDeferrals
	// when zero).
	MaxDeferrals int
	// Claimed is when the claim that granted the lease was sent (from
	// time.Now, so it carries the monotonic clock); zero means now.
	Claimed time.Time
	// Limits bound the run's cgroup; Start refuses a run whose limits
	// cannot be applied (see Containment.Check).
	Limits Limits
	// User, when set, is who the child runs as, HOME, USER and LOGNAME
	// its; a daemon that is not root may name only its own user.
	User *Credential
	// Workdir gives the run a fresh empty directory, WorkPath, owned by
	// its user: its working directory and $QD_WORKDIR, removed once the
	// run is over unless KeepWorkdir (KeepFailed, KeepAlways) keeps it.
	Workdir     bool
	KeepWorkdir string
	// MergeOutput gives the child one pipe for stdout and stderr, so the
	// log keeps the order of what it wrote to both; all of it is stdout.
	MergeOutput bool
	// Box, when set, is the box the child and all it starts are kept in
	// (package box); the supervisor adds the run's working directory.
	Box *box.Spec
	// ParentResults, for a task that waited for others, is their results,
	// one JSON object keyed by task id: the file $QD_PARENT_RESULTS names.
	ParentResults []byte
}

func (sp Spec) withDefaults() Spec {
	if sp.Lease <= 0 {
		sp.Lease = lease.DefaultLease
	}
	if sp.Heartbeat <= 0 || sp.Heartbeat >= sp.Lease {
		sp.Heartbeat = lease.DefaultHeartbeat(sp.Lease)
	}
	if sp.KillGrace <= 0 {
		sp.KillGrace = lease.DefaultKillGrace
	}
	return sp
}

// margin is how long before the lease would expire the child is killed when
// no heartbeat got through.
func (sp Spec) margin() time.Duration { return min(sp.Heartbeat, sp.Lease/4) }

// Config wires a Supervisor.
type Config struct {
	Provider lease.Provider
	Logger   hclog.Logger
	// StateDir holds runs/<run_id>.log and the child records in children/.
	StateDir string
	// Owner and Instance name this daemon (for logs).
	Owner, Instance string
	// OnLoop is called on every pass of the heartbeat loop, at least once
	// a second while a run is live and at least once every IdlePass while
	// none is: the daemon feeds the systemd watchdog from it.
	OnLoop func()
	// IdlePass is the longest the loop sleeps while no run is live
	// (DefaultIdlePass when zero): with nothing to heartbeat, nothing is
	// due until a run starts, which wakes the loop at once.
	IdlePass time.Duration
	// OnDone is called with the agent's name when a run has ended and been
	// forgotten, so that the scheduler can fill the freed slot.
	OnDone func(agent string)
	// OnEnd is called with how a run ended, after OnDone: the daemon keeps
	// each agent's last outcome and sends notifications from it. It must
	// not block.
	OnEnd func(End)
	// OnHeartbeat, when set, is told of every batched Provider.Heartbeat
	// call: how many runs it carried, how long it took and its error. It
	// must not block.
	OnHeartbeat func(runs int, took time.Duration, err error)
	// Shim is the executable that puts a boxed child in its box: the qd
	// binary, run with box.Arg. The running binary (/proc/self/exe) when
	// empty.
	Shim string
}

// RunStatus is a copy of one live run's state, for the status socket
// (the daemon puts it on the wire as an api.LiveRun).
type RunStatus struct {
	RunID          int64
	TaskID         int64
	Lane           string
	Agent          string
	Attempt        int
	MaxAttempts    int
	PID            int
	Started        time.Time
	SilentSeconds  float64 // since the last heartbeat answer
	LastOutputAt   time.Time
	LeaseExpiresAt time.Time     // by the provider's clock
	LeaseLeft      time.Duration // by the local deadline
	Stopping       string
	// CPU is the CPU time the run's processes used so far, read from its
	// cgroup; nil without one.
	CPU *time.Duration
}

// Supervisor runs children for claimed leases. Create it with New.
type Supervisor struct {
	cfg   Config
	log   hclog.Logger
	epoch time.Time // origin of mono
	caps  capsCache

	mu        sync.Mutex
	children  map[int64]*child // by run id, until settled and forgotten
	draining  bool
	drainedAt time.Time // when the drain began

	wake      chan struct{} // pokes the heartbeat loop
	settleCh  chan *settleReq
	lateHeld  atomic.Int64  // completions held past their leases (settle.go)
	stopSet   chan struct{} // closed when settling gives up (end of drain)
	stopCtx   context.Context
	giveUp    func() // closes stopSet and cancels stopCtx
	drainOnce sync.Once
	drainDone chan struct{}

	journal  journal // child records, see record
	stateDir stateDirHealth
	selfOnce sync.Once
	boot     string // see self
	start    uint64

	cg       *cgroupTree // nil: runs are process groups only
	cgReason string      // why cg is nil

	boxOnce sync.Once
	boxes   box.Support // see BoxSupport
}

// New checks cfg, creates the state directories and starts the settler.
func New(cfg Config) (*Supervisor, error) {
	if cfg.Provider == nil {
		return nil, errors.New("new supervisor: no provider")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("new supervisor: no state directory")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	var err error
	for _, d := range []string{cfg.StateDir, runsDir(cfg.StateDir), childrenDir(cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create state directory: %w", err)
		}
	}
	s := &Supervisor{
		cfg:       cfg,
		log:       cfg.Logger.Named("supervisor"),
		epoch:     time.Now(),
		children:  map[int64]*child{},
		wake:      make(chan struct{}, 1),
		settleCh:  make(chan *settleReq, 256),
		stopSet:   make(chan struct{}),
		drainDone: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCtx = ctx
	s.giveUp = sync.OnceFunc(func() {
		close(s.stopSet)
		cancel()
	})
	if s.cg, err = setupCgroups(cfg.Owner, s.log); err != nil {
		s.cgReason = err.Error()
		s.log.Warn("runs are contained by process group only: a process an agent starts that calls setsid leaves its run's group, and outlives a timeout, a cancel and the daemon's stop",
			"reason", s.cgReason)
	} else {
		s.log.Info("runs contained by cgroup", "containment", s.cg.containment().String())
	}
	go s.settleLoop()
	return s, nil
}

func runsDir(state string) string     { return filepath.Join(state, "runs") }
func childrenDir(state string) string { return filepath.Join(state, "children") }

// LogPath is the file that holds the output of run id.
func LogPath(stateDir string, runID int64) string {
	return filepath.Join(runsDir(stateDir), fmt.Sprintf("%d.log", runID))
}

// StreamsPath is the stream record of run id's log: a line "OFFSET o|e"
// wherever the log switches between stdout and stderr. A run that wrote
// only to stdout has none.
func StreamsPath(stateDir string, runID int64) string {
	return filepath.Join(runsDir(stateDir), fmt.Sprintf("%d.streams", runID))
}

// Segment is where one stream's output starts in a run's log; it lasts
// until the next segment starts.
type Segment struct {
	Offset int64
	Stderr bool
}

// ReadStreams reads the stream record at path: the segments in log order,
// or one stdout segment when there is no record.
func ReadStreams(path string) ([]Segment, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return []Segment{{Offset: 0}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stream record: %w", err)
	}
	var out []Segment
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		off, st, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(off, 10, 64)
		if !ok || err != nil || (st != "o" && st != "e") {
			return nil, fmt.Errorf("read stream record %s: bad line %q", path, line)
		}
		out = append(out, Segment{Offset: n, Stderr: st == "e"})
	}
	return out, nil
}

// mono reads the supervisor's monotonic clock, in ns since New.
func (s *Supervisor) mono() int64 { return int64(time.Since(s.epoch)) }

func (s *Supervisor) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Running counts the live runs of agent.
func (s *Supervisor) Running(agent string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.children {
		if c.spec.Agent == agent {
			n++
		}
	}
	return n
}

// Snapshot copies the state of every live run, oldest first.
func (s *Supervisor) Snapshot() []RunStatus {
	st, _ := s.SnapshotOldest(-1)
	return st
}

// SnapshotOldest copies the state of the n oldest live runs (every one
// when n < 0), oldest first, and counts all of them. Only the runs copied
// are read (a run's CPU time is a read of its cgroup), so that a status of
// thousands of children that shows a few costs what a few cost.
func (s *Supervisor) SnapshotOldest(n int) ([]RunStatus, int) {
	s.mu.Lock()
	cs := make([]*child, 0, len(s.children))
	for _, c := range s.children {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	total := len(cs)
	// Oldest first; started and the run id never change once a child is
	// recorded, so no child's lock is needed to sort.
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].started.Equal(cs[j].started) {
			return cs[i].started.Before(cs[j].started)
		}
		return cs[i].l.RunID < cs[j].l.RunID
	})
	if n >= 0 && n < len(cs) {
		cs = cs[:n]
	}
	now := s.mono()
	out := make([]RunStatus, len(cs))
	// Each status reads its run's CPU time from its cgroup, a system call:
	// thousands of runs are read on every core.
	workers := min(runtime.GOMAXPROCS(0), (len(cs)+snapshotShare-1)/snapshotShare)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(cs); i += workers {
				out[i] = cs[i].status(now)
			}
		})
	}
	wg.Wait()
	return out, total
}

// snapshotShare is how many runs' statuses one goroutine of Snapshot
// reads, at least.
const snapshotShare = 256

// DrainingSince is when the drain began; zero while the supervisor is not
// draining.
func (s *Supervisor) DrainingSince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drainedAt
}
