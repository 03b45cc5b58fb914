package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// TaskWaiting is the state of a task enqueued after others (EnqueueParams.After)
// while it waits for them: no claim takes it until it is queued.
const TaskWaiting TaskState = "waiting"

// Limits of a chain.
const (
	// MaxAfter caps how many tasks one task may wait for.
	MaxAfter = 1000
	// MaxResultBytes caps the JSON text of a run's result.
	MaxResultBytes = 1 << 20
)

// Link is a task at the other end of a dependency, as Chain lists it.
type Link struct {
	ID    int64
	Lane  string
	Agent string
	State TaskState
	// Summary says why a cancelled task was cancelled by its chain (a
	// task it waited for failed), else the summary of its latest run.
	Summary string
}

// Chains is what a provider does for tasks that wait for others. Every
// provider implements it (Provider embeds it); leasetest checks it.
//
// A task enqueued with After is waiting until every task it names is
// done, then queued in the same transaction that finished the last of
// them; when one of them fails for good or is cancelled, the waiting task
// is cancelled at once, its summary naming that task, and so are, in
// turn, the tasks waiting for it. With AfterAny it waits only for the
// named tasks to finish, however they end. A task may name only tasks
// that exist when it is enqueued, so every task it waits for is older
// than itself and no cycle can be made.
type Chains interface {
	// Chain returns the tasks taskID waits for and the tasks that wait
	// for it, each by id. ErrNotFound for an unknown id.
	Chain(ctx context.Context, taskID int64) (parents, dependents []Link, err error)
	// ParentResults returns the result of each task taskID waits for, by
	// task id: the result of its completing run, nil when it has none.
	// ErrNotFound for an unknown id.
	ParentResults(ctx context.Context, taskID int64) (map[int64]json.RawMessage, error)
	// CancelChain cancels taskID as Cancel does, and first every task
	// waiting for it, directly or through others, whatever they wait
	// for. It returns the tasks it cancelled, taskID last, with their
	// states after the call.
	CancelChain(ctx context.Context, taskID int64) ([]Link, error)
	// RetryChain queues taskID again as Retry does, together with the
	// tasks its failure or cancel cancelled (and theirs, in turn), which
	// wait again. It returns them, taskID first, with their states after
	// the call: a retried task that waits for others is waiting, or
	// cancelled again when another task it waits for failed.
	RetryChain(ctx context.Context, taskID int64) ([]Link, error)
}

// CheckAfter refuses a list of tasks to wait for that is longer than
// MaxAfter or names an id that cannot be a task's, and returns it sorted
// without repeats.
func CheckAfter(after []int64) ([]int64, error) {
	if len(after) > MaxAfter {
		return nil, fmt.Errorf("%w: a task may wait for at most %d tasks, not %d", ErrInvalid, MaxAfter, len(after))
	}
	for _, id := range after {
		if id <= 0 {
			return nil, fmt.Errorf("%w: after: %d is not a task id", ErrInvalid, id)
		}
	}
	out := slices.Clone(after)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CheckResult refuses a result larger than MaxResultBytes, nested deeper
// than MaxPayloadDepth, not JSON, or not storable (as a payload).
func CheckResult(result []byte) error {
	if len(result) > MaxResultBytes {
		return fmt.Errorf("%w: result is %d bytes, more than the %d-byte limit", ErrInvalid, len(result), MaxResultBytes)
	}
	if d := PayloadDepth(result); d > MaxPayloadDepth {
		return fmt.Errorf("%w: result nests %d levels deep, more than the limit of %d", ErrInvalid, d, MaxPayloadDepth)
	}
	if !json.Valid(result) {
		return fmt.Errorf("%w: result is not valid JSON", ErrInvalid)
	}
	switch {
	case !utf8.Valid(result):
		return fmt.Errorf("%w: result is not valid UTF-8", ErrInvalid)
	case hasNULEscape(result):
		return fmt.Errorf("%w: result contains \\u0000, which PostgreSQL cannot store", ErrInvalid)
	}
	return nil
}

// WaitReason is the summary of a task cancelled because parent, a task
// it waited for, ended in state without being done.
func WaitReason(parent int64, state TaskState) string {
	how := "failed"
	if state == TaskCancelled {
		how = "was cancelled"
	}
	return fmt.Sprintf("cancelled: task %d, which it waited for, %s", parent, how)
}

// ChainReason is the summary of a task cancelled with the chain of root
// (CancelChain).
func ChainReason(root int64) string {
	return fmt.Sprintf("cancelled: with the chain of task %d", root)
}
