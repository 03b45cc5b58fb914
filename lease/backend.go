package lease

import (
	"context"
	"errors"
	"time"
)

// Backend is a queue as backend.Open opens it: its Provider, and each
// optional ability of its backend, filled once at open time and nil where
// the backend lacks it (the in-memory provider has none). The daemon, the
// CLI and the dashboard ask for an ability by its field, never by a type
// assertion, and say what they do without it.
type Backend struct {
	Provider
	// Where names the queue for people: its URL with the password hidden
	// (Redact); "" for one that has no URL.
	Where string

	Names     NameRegistry    // which daemon holds each name, and whom it runs
	Server    ServerWatch     // when the server behind the queue changed
	Unserved  UnservedCounter // queued tasks no living daemon runs
	Txs       TxCounter       // transactions sent, for the metrics
	Dashboard DashboardStore  // the dashboard's reads and its actions
	Schema    SchemaManager   // the schema's version, migration, the database's creation
}

// DaemonRecord is the record of the daemon that holds a name: who it is,
// where it runs, the agents it runs, and when it last renewed the record.
type DaemonRecord struct {
	Name, Instance, Host string
	PID                  int
	BootID               string
	ProcStart            uint64 // the process's start time, platform units
	StateDir, Socket     string
	Version              string
	Agents               []string // the agents it runs
	StartedAt, SeenAt    time.Time
	// SeenAgo is how long ago SeenAt was, by the backend's clock.
	SeenAgo time.Duration
}

// NameRegistry keeps which daemon holds each name, so that two daemons of
// one name never run at once, and which agents each living daemon runs.
type NameRegistry interface {
	// ClaimName records d as the daemon that holds d.Name. It succeeds
	// when the name is free, already d's, held by the instance takeOver
	// (one its caller proved gone), or held by a daemon not seen for
	// longer than stale. Otherwise it changes nothing and returns the
	// holder with ok false.
	ClaimName(ctx context.Context, d DaemonRecord, takeOver string, stale time.Duration) (holder DaemonRecord, ok bool, err error)
	// TouchName renews the record of name held by instance, with the
	// agents it runs now; ok is false when another holds the name.
	TouchName(ctx context.Context, name, instance string, agents []string) (ok bool, err error)
	// ReleaseName gives the name up, when instance still holds it.
	ReleaseName(ctx context.Context, name, instance string) error
	// Daemons lists the records, by name.
	Daemons(ctx context.Context) ([]DaemonRecord, error)
}

// ServerWatch tells when a new connection last found another server than
// the one before (another cluster or database, a new timeline, a history
// behind what was seen), by this process's clock, and why; zero when none
// did. A restart of the same server is no change.
type ServerWatch interface {
	ServerChange() (at time.Time, why string)
}

// UnservedAgent counts the queued tasks of an agent that no living daemon
// runs.
type UnservedAgent struct {
	Agent  string
	Queued int
}

// UnservedCounter counts the queued tasks whose agent no daemon seen
// within stale runs: they wait for a daemon that may never come.
type UnservedCounter interface {
	UnservedAgents(ctx context.Context, stale time.Duration) ([]UnservedAgent, error)
}

// TxCounter says how many transactions a backend has sent.
type TxCounter interface {
	Transactions() int64
}

// DashboardStore is what the dashboard reads and changes: a part of
// Provider, on connections of its own where the backend has them (so that
// no page can take what the lease path needs), and the dashboard's own
// bounded reads.
type DashboardStore interface {
	Enqueue(ctx context.Context, p EnqueueParams) (int64, bool, error)
	Cancel(ctx context.Context, taskID int64) (TaskState, error)
	Retry(ctx context.Context, taskID int64) error
	SetLane(ctx context.Context, u LaneUpdate) (Lane, error)
	Lanes(ctx context.Context) ([]Lane, error)
	PauseAgent(ctx context.Context, agent, setBy string) (AgentPause, error)
	ResumeAgent(ctx context.Context, agent string) error
	PausedAgents(ctx context.Context) ([]AgentPause, error)
	Task(ctx context.Context, id int64) (Task, error)
	Run(ctx context.Context, id int64) (Run, error)
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// Chain is Chains.Chain: the tasks a task waits for and those waiting
	// for it.
	Chain(ctx context.Context, taskID int64) (parents, dependents []Link, err error)

	FindTasks(ctx context.Context, q TaskQuery) ([]Task, error)
	CountTasks(ctx context.Context, q TaskQuery, states ...TaskState) (Count, error)
	BulkRetry(ctx context.Context, q TaskQuery) (int64, error)
	BulkCancel(ctx context.Context, q TaskQuery) (int64, error)
	LiveRuns(ctx context.Context) ([]Run, error)
	RunsBetween(ctx context.Context, from, to time.Time, limit int) ([]Run, Count, error)
	Throughput(ctx context.Context, from, to time.Time, every time.Duration) ([]Bucket, error)
	LastOutcomes(ctx context.Context, agents []string) ([]Run, error)
	PeriodicRecords(ctx context.Context) ([]PeriodicRecord, error)
	Limits(ctx context.Context) ([]Limit, error)
	Budgets(ctx context.Context) ([]Budget, error)
}

// Errors of a backend whose schema has versions.
var (
	// ErrNotMigrated: the schema is missing or older than this build.
	ErrNotMigrated = errors.New("queue schema is missing or out of date: run `qd migrate`")
	// ErrSchemaNewer: a newer qd migrated the schema past what this build
	// can run on.
	ErrSchemaNewer = errors.New("the queue schema is newer than this qd: upgrade qd (docs/database.md, \"Upgrading\")")
)

// SchemaManager owns a versioned schema on a database server.
type SchemaManager interface {
	// Schema names the schema.
	Schema() string
	// SchemaVersion is the schema's version, 0 when it does not exist.
	SchemaVersion(ctx context.Context) (int, error)
	// CheckSchema says whether this build can run on the schema: nil, or
	// an error matching ErrNotMigrated or ErrSchemaNewer, or the
	// database's own error when the schema cannot be read.
	CheckSchema(ctx context.Context) error
	// Migrate creates the schema, or brings it to this build's version.
	Migrate(ctx context.Context) error
	// CreateDatabase creates the database the queue names when it does
	// not exist and the server lets it, and returns its name, or "" when
	// it existed.
	CreateDatabase(ctx context.Context) (created string, err error)
}
