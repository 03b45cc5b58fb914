package ui

import (
	"context"
	"html/template"
	"net/url"
	"strconv"
	"time"

	"github.com/qd-run/qd/lease"
)

// maxChain caps the tasks of a chain the timeline draws.
const maxChain = 500

// chainTasks is task id and every task on its chain: the tasks it waits
// for and those waiting for it, each way to the chain's ends, at most
// maxChain of them.
func (s *server) chainTasks(ctx context.Context, id int64) ([]int64, error) {
	seen := map[int64]bool{id: true}
	out := []int64{id}
	for i := 0; i < len(out) && len(out) < maxChain; i++ {
		parents, dependents, err := s.o.Store.Chain(ctx, out[i])
		if err != nil {
			return nil, err
		}
		for _, l := range append(parents, dependents...) {
			if !seen[l.ID] && len(out) < maxChain {
				seen[l.ID] = true
				out = append(out, l.ID)
			}
		}
	}
	return out, nil
}

// chainTimeline is the timeline of the chain of task id: the runs of its
// tasks, in the window v names, else in one that spans them.
func (s *server) chainTimeline(ctx context.Context, v url.Values, id int64) (*Timeline, error) {
	tasks, err := s.chainTasks(ctx, id)
	if err != nil {
		return nil, err
	}
	var runs []lease.Run
	for _, t := range tasks {
		rs, err := s.o.Store.Runs(ctx, lease.RunFilter{TaskID: t})
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	from, to, name, err := window(v)
	if err != nil {
		return nil, err
	}
	if v.Get("from") == "" && v.Get("to") == "" && len(runs) > 0 {
		from, to, name = spanOf(runs)
	}
	var shown []lease.Run
	for _, r := range runs {
		if r.StartedAt.Before(to) && (r.FinishedAt.IsZero() || r.FinishedAt.After(from)) {
			shown = append(shown, r)
		}
	}
	tl := layout(from, to, name, shown, nil, lease.Count{N: int64(len(shown))})
	tl.Chain = id
	for _, q := range []*template.URL{&tl.ZoomIn, &tl.ZoomOut, &tl.Earlier, &tl.Later} {
		*q += template.URL("&chain=" + strconv.FormatInt(id, 10))
	}
	return tl, nil
}

// spanOf is a window around runs, with a margin each side.
func spanOf(runs []lease.Run) (from, to time.Time, name string) {
	from, to = runs[0].StartedAt, runs[0].StartedAt
	for _, r := range runs {
		end := r.FinishedAt
		if end.IsZero() {
			end = time.Now()
		}
		from, to = earliest(from, r.StartedAt), latest(to, end)
	}
	margin := max(to.Sub(from)/20, time.Second)
	return from.Add(-margin), to.Add(margin), ""
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
