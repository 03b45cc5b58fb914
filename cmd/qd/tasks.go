package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var tasksCommand = &command{
	name:    "tasks",
	summary: "list tasks",
	usage:   "[--lane L] [--agent A] [--state S] [--limit N] [--json]",
	help: `Columns: id, lane, agent, state, priority, attempts/max, when it may run
next (queued tasks), age. JSON when --json is given or stdout is not a terminal.`,
	db:    true,
	reads: true,
	json:  true,
	setup: setupTasks,
}

var showCommand = &command{
	name:    "show",
	summary: "show a task, its payload and every run of it",
	usage:   "TASK [--json]",
	help: `Also lists the tasks it waits for and those waiting for it, with their
states, and the task's result once done. JSON ({"task": ..., "runs": [...],
"parents": [...], "dependents": [...]}) when --json is given or stdout is not
a terminal.`,
	db:    true,
	reads: true,
	json:  true,
	setup: func(*flag.FlagSet) runFunc { return runShow },
}

var taskStates = []lease.TaskState{lease.TaskWaiting, lease.TaskQueued, lease.TaskRunning, lease.TaskDone, lease.TaskFailed, lease.TaskCancelled}

func setupTasks(fs *flag.FlagSet) runFunc {
	var f lease.TaskFilter
	fs.StringVar(&f.Lane, "lane", "", "only lane `NAME`")
	fs.StringVar(&f.Agent, "agent", "", "only agent `NAME`")
	readState := listFlags(fs, "tasks", taskStates, &f.State, &f.Limit)
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if err := readState(); err != nil {
			return err
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		tasks, err := prov.Tasks(ctx, f)
		if err != nil {
			return err
		}
		return writeTasks(env, tasks)
	}
}

func writeTasks(env *Env, tasks []lease.Task) error {
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(tasks, api.TaskOf))
	}
	now := time.Now()
	tb := newTable(env.Stdout, "ID", "LANE", "AGENT", "STATE", "PRIO", "ATTEMPTS", "NEXT", "AGE", "LAST SUMMARY")
	for _, t := range tasks {
		tb.row(strconv.FormatInt(t.ID, 10), t.Lane, t.Agent, string(t.State), strconv.Itoa(t.Priority),
			fmt.Sprintf("%d/%d", t.Attempts, t.MaxAttempts), nextRun(t, now), relative(t.CreatedAt, now), truncate(t.LastSummary, 60))
	}
	return tb.flush()
}

// nextRun says when a queued task may run: "now" or "in 30s".
func nextRun(t lease.Task, now time.Time) string {
	if t.State != lease.TaskQueued {
		return "-"
	}
	if !t.RunAfter.After(now) {
		return "now"
	}
	return relative(t.RunAfter, now)
}

func runShow(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	id, prov, err := env.idAndProvider(ctx, "task", args)
	if err != nil {
		return err
	}
	t, err := prov.Task(ctx, id)
	if err != nil {
		return err
	}
	runs, err := prov.Runs(ctx, lease.RunFilter{TaskID: id})
	if err != nil {
		return err
	}
	notes, err := prov.Notifications(ctx, id)
	if err != nil {
		return err
	}
	parents, dependents, err := prov.Chain(ctx, id)
	if err != nil {
		return err
	}
	if env.wantJSON() {
		out := struct {
			Task          api.Task           `json:"task"`
			Runs          []api.Run          `json:"runs"`
			Notifications []notificationJSON `json:"notifications"`
			Parents       []api.Link         `json:"parents"`
			Dependents    []api.Link         `json:"dependents"`
		}{api.TaskOf(t), jsonList(runs, api.RunOf), jsonList(notes, toNotificationJSON),
			jsonList(parents, api.LinkOf), jsonList(dependents, api.LinkOf)}
		return writeJSON(env.Stdout, out)
	}
	writeTaskDetail(env, t)
	if err := writeChain(env, parents, dependents); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout)
	if err := writeRunTable(env, runs); err != nil || len(notes) == 0 {
		return err
	}
	fmt.Fprintln(env.Stdout)
	now := time.Now()
	tb := newTable(env.Stdout, "NOTIFIED", "RUN", "EVENT", "TARGET", "STATUS", "TRIES", "BY", "DETAIL")
	for _, n := range notes {
		tb.row(relative(n.CreatedAt, now), strconv.FormatInt(n.RunID, 10), n.Event, truncate(n.Target, 60),
			notificationState(n, now), strconv.Itoa(n.Tries), n.SentBy, truncate(n.Detail, 60))
	}
	return tb.flush()
}

// notificationState says where a notification is: sent, failed (for
// good), sending, or when it is tried next.
func notificationState(n lease.Notification, now time.Time) string {
	switch {
	case n.Status != lease.NotificationPending || n.DueAt.IsZero():
		return string(n.Status)
	case n.Tries == 0:
		return "pending"
	case !n.DueAt.After(now):
		return "retry now"
	}
	return "retry " + relative(n.DueAt, now)
}

// notificationJSON is the JSON form of a notification.
type notificationJSON struct {
	RunID      int64      `json:"run_id"`
	Event      string     `json:"event"`
	Target     string     `json:"target"`
	Status     string     `json:"status"`
	Tries      int        `json:"tries"`
	Detail     string     `json:"detail"`
	SentBy     string     `json:"sent_by"`
	CreatedAt  *time.Time `json:"created_at"`
	DueAt      *time.Time `json:"due_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

func toNotificationJSON(n lease.Notification) notificationJSON {
	return notificationJSON{n.RunID, n.Event, n.Target, string(n.Status), n.Tries, n.Detail, n.SentBy,
		api.When(n.CreatedAt), api.When(n.DueAt), api.When(n.FinishedAt)}
}

func writeTaskDetail(env *Env, t lease.Task) {
	now := time.Now()
	tb := newTable(env.Stdout, "task", strconv.FormatInt(t.ID, 10))
	tb.row("lane", t.Lane)
	tb.row("agent", t.Agent)
	state := string(t.State)
	if t.CancelRequested && t.State == lease.TaskRunning {
		state += " (cancel requested)"
	}
	tb.row("state", state)
	tb.row("priority", strconv.Itoa(t.Priority))
	tb.row("attempts", fmt.Sprintf("%d/%d", t.Attempts, t.MaxAttempts))
	tb.row("next run", nextRun(t, now))
	if t.DedupeKey != "" {
		tb.row("key", t.DedupeKey)
	}
	if t.ParentRun != 0 {
		tb.row("enqueued by", fmt.Sprintf("run %d", t.ParentRun))
	}
	if len(t.After) > 0 {
		mode := "after"
		if t.AfterAny {
			mode = "after any of"
		}
		tb.row("waits", fmt.Sprintf("%s %d task(s)", mode, len(t.After)))
	}
	if t.LastSummary != "" && t.State == lease.TaskCancelled {
		tb.row("why", t.LastSummary)
	}
	tb.row("created", relative(t.CreatedAt, now))
	tb.row("finished", relative(t.FinishedAt, now))
	tb.flush()
	defer writeResult(env, t)
	fmt.Fprintf(env.Stdout, "payload:\n")
	var pretty bytes.Buffer
	if _, note := lease.ShowPayload(t.Payload); note != "" {
		fmt.Fprintf(env.Stdout, "  (%s)\n", note)
		pretty.Write(t.Payload)
	} else if json.Indent(&pretty, t.Payload, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(t.Payload)
	}
	fmt.Fprintf(env.Stdout, "  %s\n", pretty.Bytes())
}

// writeResult prints the task's result, indented, when it has one.
func writeResult(env *Env, t lease.Task) {
	if t.Result == nil {
		return
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, t.Result, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(t.Result)
	}
	fmt.Fprintf(env.Stdout, "result:\n  %s\n", pretty.Bytes())
}
