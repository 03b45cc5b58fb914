package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

const readOnlyMessage = "the dashboard is read-only (--read-only): actions are refused"

// ActionsPage is the actions page: the forms to enqueue and to run an
// agent now, with the lanes and agents known.
type ActionsPage struct {
	Lanes  []string `json:"lanes"`
	Agents []string `json:"agents"`
}

func (s *server) actionsPage(r *http.Request) (any, error) {
	lanes, err := s.o.Store.Lanes(r.Context())
	if err != nil {
		return nil, err
	}
	p := &ActionsPage{Lanes: []string{}, Agents: []string{}}
	for _, l := range lanes {
		p.Lanes = append(p.Lanes, l.Name)
	}
	seen := map[string]bool{}
	if s.o.Daemons != nil {
		if ds, err := s.o.Daemons(r.Context()); err == nil {
			for _, d := range ds {
				for _, a := range d.Agents {
					if !seen[a] {
						seen[a] = true
						p.Agents = append(p.Agents, a)
					}
				}
			}
		}
	}
	return p, nil
}

// result is what an action says it did.
type result struct {
	Message string `json:"message"`
	TaskID  int64  `json:"task_id,omitempty"`
	Count   int64  `json:"count,omitempty"`
}

// action registers a POST that changes state. It is refused in read-only
// mode. Its answer is a flash fragment for htmx, JSON when asked, else a
// redirect back to the page the form was on.
func (s *server) action(pattern string, do func(r *http.Request) (result, error)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadOnly {
			s.answer(w, r, result{}, errReadOnly)
			return
		}
		if err := r.ParseForm(); err != nil { // the body is capped at Limits.Body
			s.answer(w, r, result{}, badQuery("read form: %v", err))
			return
		}
		s.load(w, r, 0, func(r *http.Request) {
			res, err := do(r)
			if err != nil {
				s.o.Logger.Info("dashboard action refused", "action", r.URL.Path, "error", scrub(err))
			} else {
				s.o.Logger.Info("dashboard action", "action", r.URL.Path, "result", res.Message)
			}
			s.answer(w, r, res, err)
		})
	})
}

var errReadOnly = errors.New(readOnlyMessage)

func (s *server) answer(w http.ResponseWriter, r *http.Request, res result, err error) {
	code := http.StatusOK
	if err != nil {
		code = status(err)
		if errors.Is(err, errReadOnly) {
			code = http.StatusForbidden
		}
		res.Message = scrub(err)
	}
	switch {
	case r.Header.Get("HX-Request") == "true":
		// htmx swaps only successful answers; the flash says which it was.
		s.render(w, http.StatusOK, "flash", "flash", map[string]any{"Message": res.Message, "Failed": err != nil, "TaskID": res.TaskID})
	case strings.Contains(r.Header.Get("Accept"), "application/json"):
		if err != nil {
			writeJSON(w, code, map[string]string{"error": res.Message})
			return
		}
		writeJSON(w, code, res)
	case err != nil:
		http.Error(w, res.Message, code)
	default:
		back := r.FormValue("back")
		if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.Contains(back, `\`) {
			back = "/"
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// enqueueParams reads the enqueue form: lane, agent, payload, priority and
// delay (a duration, or seconds). The lane is left empty when the form
// names none; ValidateEnqueue gives it the default.
func enqueueParams(r *http.Request) (lease.EnqueueParams, error) {
	p := lease.EnqueueParams{Lane: strings.TrimSpace(r.FormValue("lane")), Agent: strings.TrimSpace(r.FormValue("agent"))}
	if payload := strings.TrimSpace(r.FormValue("payload")); payload != "" {
		p.Payload = json.RawMessage(payload)
	}
	if v := strings.TrimSpace(r.FormValue("priority")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return p, fmt.Errorf("%w: priority %q is not a whole number", lease.ErrInvalid, v)
		}
		p.Priority = n
	}
	if v := strings.TrimSpace(r.FormValue("delay")); v != "" {
		d, err := time.ParseDuration(v)
		if n, nerr := strconv.ParseFloat(v, 64); nerr == nil {
			d, err = time.Duration(n*float64(time.Second)), nil
		}
		if err != nil {
			return p, fmt.Errorf("%w: delay %q is not a duration (30s, 5m) or seconds", lease.ErrInvalid, v)
		}
		p.Delay = d
	}
	return p, nil
}

// agentInfo is what the daemons sharing the queue say of an agent.
type agentInfo struct {
	known  bool     // a living daemon runs it
	lanes  []string // the lanes it serves, as a daemon here says; nil: any lane, or none here to ask
	others []string // the agents the living daemons run, for a refusal
}

func (s *server) agentInfo(ctx context.Context, agent string) agentInfo {
	var info agentInfo
	ds, snaps, _ := s.snapshots(ctx)
	seen := map[string]bool{}
	for _, d := range ds {
		for _, a := range d.Agents {
			info.known = info.known || a == agent
			if !seen[a] {
				seen[a] = true
				info.others = append(info.others, a)
			}
		}
	}
	for _, snap := range snaps {
		for _, a := range snap.Agents {
			if a.Name == agent && len(a.Lanes) > 0 {
				info.lanes = a.Lanes
			}
		}
	}
	return info
}

// warnings says, after an enqueue, why the task may wait: as qd enqueue
// says, no living daemon runs its agent, or the agent serves other lanes.
func (info agentInfo) warnings(p lease.EnqueueParams) string {
	switch {
	case !info.known:
		return fmt.Sprintf("; no living daemon runs agent %s, so the task waits until one does", p.Agent)
	case info.lanes != nil && !slices.Contains(info.lanes, p.Lane):
		return fmt.Sprintf("; agent %s serves lanes %s, not %s, so the task waits until a daemon whose agent %s serves it runs",
			p.Agent, strings.Join(info.lanes, ", "), p.Lane, p.Agent)
	}
	return ""
}

func (s *server) enqueue(r *http.Request) (result, error) {
	p, err := enqueueParams(r)
	if err == nil {
		err = lease.ValidateEnqueue(&p)
	}
	if err != nil {
		return result{}, err
	}
	id, existed, err := s.o.Store.Enqueue(r.Context(), p)
	if err != nil {
		return result{}, err
	}
	if existed {
		return result{Message: fmt.Sprintf("task %d already holds that dedupe key; nothing new queued", id), TaskID: id}, nil
	}
	msg := fmt.Sprintf("task %d queued in lane %s for agent %s", id, p.Lane, p.Agent)
	return result{Message: msg + s.agentInfo(r.Context(), p.Agent).warnings(p), TaskID: id}, nil
}

// runNow enqueues a task and wakes the daemons on this host that run its
// agent, so that one claims it at once. As qd run-now, it refuses an agent
// no living daemon runs, and a lane the agent does not serve; with no lane
// given it takes the agent's first.
func (s *server) runNow(r *http.Request) (result, error) {
	p, err := enqueueParams(r)
	if err != nil {
		return result{}, err
	}
	info := s.agentInfo(r.Context(), p.Agent)
	switch {
	case !info.known:
		return result{}, fmt.Errorf("%w: no living daemon runs agent %q; they run: %s", lease.ErrInvalid, p.Agent, orNone(info.others))
	case p.Lane == "" && len(info.lanes) > 0:
		p.Lane = info.lanes[0]
	case p.Lane != "" && info.lanes != nil && !slices.Contains(info.lanes, p.Lane):
		return result{}, fmt.Errorf("%w: lane %q is not among the lanes of agent %s (%s), so its task would never run",
			lease.ErrInvalid, p.Lane, p.Agent, strings.Join(info.lanes, ", "))
	}
	if err := lease.ValidateEnqueue(&p); err != nil {
		return result{}, err
	}
	id, existed, err := s.o.Store.Enqueue(r.Context(), p)
	if err != nil {
		return result{}, err
	}
	res := result{Message: fmt.Sprintf("task %d queued in lane %s for agent %s", id, p.Lane, p.Agent), TaskID: id}
	if existed {
		res.Message = fmt.Sprintf("task %d already holds that dedupe key; nothing new queued", id)
		return res, nil
	}
	_, snaps, _ := s.snapshots(r.Context())
	woken := 0
	for _, ds := range s.localDaemons(r.Context()) {
		if snap := snaps[ds.Name]; snap != nil && servesLane(snap, p.Agent, p.Lane) {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			if (api.Client{Path: ds.Socket}).Wake(ctx, p.Agent) == nil {
				woken++
			}
			cancel()
		}
	}
	if woken == 0 {
		res.Message += "; no daemon on this host runs that agent, so a daemon elsewhere claims it at the agent's next tick"
	} else {
		res.Message += fmt.Sprintf("; %d daemon(s) woken to claim it now", woken)
	}
	return res, nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// servesLane reports whether the daemon of snap runs agent for tasks of
// lane.
func servesLane(snap *api.Snapshot, agent, lane string) bool {
	for _, a := range snap.Agents {
		if a.Name == agent && (len(a.Lanes) == 0 || slices.Contains(a.Lanes, lane)) {
			return true
		}
	}
	return false
}

func (s *server) localDaemons(ctx context.Context) []Daemon {
	var out []Daemon
	for _, d := range s.daemonsByName(ctx) {
		if d.Host == s.o.Hostname && d.Socket != "" {
			out = append(out, d)
		}
	}
	return out
}

func taskID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: task id %q is not a number", lease.ErrInvalid, r.PathValue("id"))
	}
	return id, nil
}

func (s *server) cancel(r *http.Request) (result, error) {
	id, err := taskID(r)
	if err != nil {
		return result{}, err
	}
	st, err := s.o.Store.Cancel(r.Context(), id)
	if err != nil {
		return result{}, err
	}
	if st == lease.TaskRunning {
		return result{Message: fmt.Sprintf("task %d: cancel requested; its daemon stops the run within about a second", id), TaskID: id}, nil
	}
	return result{Message: fmt.Sprintf("task %d cancelled", id), TaskID: id}, nil
}

func (s *server) retry(r *http.Request) (result, error) {
	id, err := taskID(r)
	if err != nil {
		return result{}, err
	}
	if err := s.o.Store.Retry(r.Context(), id); err != nil {
		return result{}, err
	}
	return result{Message: fmt.Sprintf("task %d queued again with fresh attempts", id), TaskID: id}, nil
}

func (s *server) pause(paused bool) func(r *http.Request) (result, error) {
	return func(r *http.Request) (result, error) {
		name := r.PathValue("name")
		if _, err := s.o.Store.SetLane(r.Context(), lease.LaneUpdate{Name: name, Paused: &paused, SetBy: "qd ui"}); err != nil {
			return result{}, err
		}
		if paused {
			return result{Message: fmt.Sprintf("lane %s paused: nothing more is claimed from it", name)}, nil
		}
		return result{Message: fmt.Sprintf("lane %s resumed", name)}, nil
	}
}

// pauseAgent pauses or resumes the agent named in the path, in every
// daemon's claims.
func (s *server) pauseAgent(paused bool) func(r *http.Request) (result, error) {
	return func(r *http.Request) (result, error) {
		name := r.PathValue("name")
		if !paused {
			if err := s.o.Store.ResumeAgent(r.Context(), name); err != nil {
				return result{}, err
			}
			return result{Message: fmt.Sprintf("agent %s resumed: its queued tasks are claimed again", name)}, nil
		}
		if _, err := s.o.Store.PauseAgent(r.Context(), name, "qd ui"); err != nil {
			return result{}, err
		}
		return result{Message: fmt.Sprintf("agent %s paused: none of its tasks is claimed until it is resumed; live runs go on", name)}, nil
	}
}

// bulk retries or cancels every task the posted filter selects.
func (s *server) bulk(r *http.Request) (result, error) {
	_, q, err := parseFilter(r.PostForm)
	if err != nil {
		return result{}, err
	}
	q.Before = 0
	var n int64
	switch a := r.PostFormValue("action"); a {
	case "retry":
		n, err = s.o.Store.BulkRetry(r.Context(), q)
	case "cancel":
		n, err = s.o.Store.BulkCancel(r.Context(), q)
	default:
		return result{}, fmt.Errorf("%w: action %q is not retry or cancel", lease.ErrInvalid, a)
	}
	if err != nil {
		return result{Count: n}, err
	}
	verb := map[string]string{"retry": "queued again", "cancel": "cancelled or marked for cancel"}[r.PostFormValue("action")]
	return result{Message: fmt.Sprintf("%d %s %s", n, plural(n, "task", "tasks"), verb), Count: n}, nil
}

// plural is one when n is 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
