package lease

import "time"

// TaskQuery selects tasks for a listing that pages through a long history:
// newest first, by keyset (Before), never by offset. Zero fields match
// everything.
type TaskQuery struct {
	Lane  string
	Agent string
	State TaskState
	// Text keeps the tasks whose payload contains it (case-insensitive).
	Text string
	// From and To bound when the task was created; zero leaves that side open.
	From, To time.Time
	// Before keeps the tasks with a smaller id: the page after one that
	// ended at Before. 0 starts at the newest.
	Before int64
	Limit  int
	// CountBudget bounds how long counting what the query selects may take
	// before the count settles for an estimate; zero leaves it to the
	// provider.
	CountBudget time.Duration
}

// Count is a number of rows, exact, or a planner's estimate when counting
// exactly would read too many rows.
type Count struct {
	N         int64
	Estimated bool
}

// Bucket is one interval of a throughput chart: how many runs finished in
// it by outcome, and the queue wait (run_after to start) of the runs that
// started in it, as percentiles in seconds.
type Bucket struct {
	At       time.Time
	Finished map[RunState]int64
	Started  int64 // estimated from the sample when WaitSample > 1
	WaitP50  float64
	WaitP90  float64
	WaitP99  float64
	// WaitSample says the percentiles come from 1 in WaitSample of the
	// runs started (1: all of them), which bounds the cost of a long window.
	WaitSample int64
	// Usage is what the runs that finished in the bucket reported they
	// spent (qd usage), summed by agent; empty when none reported any.
	Usage map[string]float64
}

// PeriodicRecord is the last tick a periodic schedule recorded in the queue.
type PeriodicRecord struct {
	Name     string
	LastTick time.Time
}
