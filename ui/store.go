package ui

import (
	"context"
	"time"

	"github.com/qd-run/qd/lease"
)

// Store is what the dashboard reads and changes in the queue: a part of
// lease.Provider and the dashboard's own bounded reads (pg/dashboard.go).
type Store interface {
	Enqueue(ctx context.Context, p lease.EnqueueParams) (int64, bool, error)
	Cancel(ctx context.Context, taskID int64) (lease.TaskState, error)
	Retry(ctx context.Context, taskID int64) error
	SetLane(ctx context.Context, u lease.LaneUpdate) (lease.Lane, error)
	Lanes(ctx context.Context) ([]lease.Lane, error)
	Task(ctx context.Context, id int64) (lease.Task, error)
	Runs(ctx context.Context, f lease.RunFilter) ([]lease.Run, error)

	FindTasks(ctx context.Context, q lease.TaskQuery) ([]lease.Task, error)
	CountTasks(ctx context.Context, q lease.TaskQuery, states ...lease.TaskState) (lease.Count, error)
	BulkRetry(ctx context.Context, q lease.TaskQuery) (int64, error)
	BulkCancel(ctx context.Context, q lease.TaskQuery) (int64, error)
	LiveRuns(ctx context.Context) ([]lease.Run, error)
	RunsBetween(ctx context.Context, from, to time.Time, limit int) ([]lease.Run, lease.Count, error)
	Throughput(ctx context.Context, from, to time.Time, every time.Duration) ([]lease.Bucket, error)
	LastOutcomes(ctx context.Context, agents []string) ([]lease.Run, error)
	PeriodicRecords(ctx context.Context) ([]lease.PeriodicRecord, error)
}

// Daemon is a daemon that shares the queue, as its row in the queue's
// daemons table says.
type Daemon struct {
	Name     string
	Host     string
	Socket   string
	StateDir string
	Agents   []string
	// SeenAgo is how long ago it last renewed its row.
	SeenAgo time.Duration
}
