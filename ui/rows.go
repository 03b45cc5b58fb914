package ui

import (
	"encoding/json"
	"time"

	"github.com/qd-run/qd/lease"
)

// The JSON of the pages names its fields as `qd ... --json` does.

// LaneRow is a lane with its counts.
type LaneRow struct {
	Name         string    `json:"name"`
	MaxRunning   int       `json:"max_running"`
	Paused       bool      `json:"paused"`
	Running      int       `json:"running"`
	Queued       int       `json:"queued"`
	OldestQueued time.Time `json:"oldest_queued,omitzero"`
	SetBy        string    `json:"set_by,omitempty"`
}

func laneRows(ls []lease.Lane) []LaneRow {
	out := make([]LaneRow, len(ls))
	for i, l := range ls {
		out[i] = LaneRow{Name: l.Name, MaxRunning: l.MaxRunning, Paused: l.Paused, Running: l.Running,
			Queued: l.Queued, OldestQueued: l.OldestQueued, SetBy: l.SetBy}
	}
	return out
}

// TaskRow is a task.
type TaskRow struct {
	ID              int64           `json:"id"`
	Lane            string          `json:"lane"`
	Agent           string          `json:"agent"`
	State           lease.TaskState `json:"state"`
	Priority        int             `json:"priority"`
	Attempts        int             `json:"attempts"`
	MaxAttempts     int             `json:"max_attempts"`
	RunAfter        time.Time       `json:"run_after"`
	DedupeKey       string          `json:"dedupe_key,omitempty"`
	ParentRun       int64           `json:"parent_run,omitempty"`
	LastSummary     string          `json:"last_summary"`
	CancelRequested bool            `json:"cancel_requested"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      time.Time       `json:"finished_at,omitzero"`
	Payload         json.RawMessage `json:"payload"`
	// PayloadNote says why Payload is the stored text as a string: it
	// nests deeper than lease.MaxPayloadDepth, or is not JSON.
	PayloadNote string `json:"payload_note,omitempty"`
}

func taskRow(t lease.Task) TaskRow {
	payload, note := lease.ShowPayload(t.Payload)
	return TaskRow{ID: t.ID, Lane: t.Lane, Agent: t.Agent, State: t.State, Priority: t.Priority, Attempts: t.Attempts,
		MaxAttempts: t.MaxAttempts, RunAfter: t.RunAfter, DedupeKey: t.DedupeKey, ParentRun: t.ParentRun,
		LastSummary: t.LastSummary, CancelRequested: t.CancelRequested, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		FinishedAt: t.FinishedAt, Payload: payload, PayloadNote: note}
}

func taskRows(ts []lease.Task) []TaskRow {
	out := make([]TaskRow, len(ts))
	for i, t := range ts {
		out[i] = taskRow(t)
	}
	return out
}

// BucketRow is one interval of the throughput charts.
type BucketRow struct {
	At       time.Time                `json:"at"`
	Finished map[lease.RunState]int64 `json:"finished"`
	Started  int64                    `json:"started"`
	WaitP50  float64                  `json:"wait_p50_seconds"`
	WaitP90  float64                  `json:"wait_p90_seconds"`
	WaitP99  float64                  `json:"wait_p99_seconds"`
}
