package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qd-run/qd/lease"
)

// tableStats is what the statistics collector and the catalog say about one
// table.
type tableStats struct {
	Ins, Upd, HotUpd, Dead int64
	Size, IndexSize        int64 // bytes
}

// readStats reads the statistics of the tasks and runs tables of f.
func readStats(ctx context.Context, f *fixture) (map[string]tableStats, error) {
	rows, err := f.pool().Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup,
		pg_relation_size(relid), pg_indexes_size(relid)
		FROM pg_stat_user_tables WHERE schemaname = $1 AND relname IN ('tasks', 'runs')`, f.schema)
	if err != nil {
		return nil, fmt.Errorf("read table statistics of %s: %w", f.schema, err)
	}
	defer rows.Close()
	out := map[string]tableStats{}
	for rows.Next() {
		var name string
		var s tableStats
		if err := rows.Scan(&name, &s.Ins, &s.Upd, &s.HotUpd, &s.Dead, &s.Size, &s.IndexSize); err != nil {
			return nil, fmt.Errorf("read table statistics of %s: %w", f.schema, err)
		}
		out[name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read table statistics of %s: %w", f.schema, err)
	}
	return out, nil
}

// settledStats waits until the statistics show what ready wants and stop
// changing. Backends publish their counts at most about once a second, and
// at exit, so the caller closes the writing connections first.
func settledStats(ctx context.Context, f *fixture, ready func(map[string]tableStats) bool) (map[string]tableStats, error) {
	deadline := time.Now().Add(30 * time.Second)
	var last map[string]tableStats
	for {
		s, err := readStats(ctx, f)
		if err != nil {
			return nil, err
		}
		if ready(s) && last != nil && equalStats(s, last) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("statistics of %s did not settle within 30 s (last read %v)", f.schema, s)
		}
		last = s
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func equalStats(a, b map[string]tableStats) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// soak heartbeats liveRuns live runs once a second, all in one call as a
// supervisor does, and reports what that did to the tables.
func (b *runner) soak(ctx context.Context) error {
	f, err := b.open(ctx, "soak", b.sc.Lanes)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	if err := f.reset(ctx, liveRuns); err != nil {
		return err
	}
	ids, err := claimLive(ctx, f, liveRuns)
	if err != nil {
		return err
	}
	if err := f.reopen(ctx); err != nil {
		return err
	}
	before, err := settledStats(ctx, f, func(s map[string]tableStats) bool {
		return s["runs"].Ins >= liveRuns && s["tasks"].Upd >= liveRuns
	})
	if err != nil {
		return err
	}
	b.log.Info("soaking", "live_runs", len(ids), "for", b.sc.Soak)
	calls, maxDead, err := b.beatEverySecond(ctx, f, ids)
	if err != nil {
		return err
	}
	sent := int64(len(calls) * len(ids))
	if err := f.reopen(ctx); err != nil {
		return err
	}
	after, err := settledStats(ctx, f, func(s map[string]tableStats) bool {
		return s["runs"].Upd >= before["runs"].Upd+sent
	})
	if err != nil {
		return err
	}
	b.soakFigures(len(ids), calls, maxDead, before, after)
	return nil
}

// beatEverySecond sends one Heartbeat call for all ids at the start of every
// second of the soak. It returns each call's duration and the most dead
// tuples of runs seen meanwhile.
func (b *runner) beatEverySecond(ctx context.Context, f *fixture, ids []int64) ([]time.Duration, int64, error) {
	beats := make([]lease.Beat, len(ids))
	for i, id := range ids {
		beats[i] = lease.Beat{RunID: id, Lease: benchLease}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var calls []time.Duration
	var maxDead int64
	for i := range int(b.sc.Soak / time.Second) {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		start := time.Now()
		if _, err := beat(ctx, f, beats); err != nil {
			return nil, 0, err
		}
		calls = append(calls, time.Since(start))
		s, err := readStats(ctx, f)
		if err != nil {
			return nil, 0, err
		}
		maxDead = max(maxDead, s["runs"].Dead)
		var held float64
		if err := f.pool().QueryRow(ctx, oldestSnapshotSQL).Scan(&held); err != nil {
			return nil, 0, fmt.Errorf("read oldest snapshot: %w", err)
		}
		b.oldestSnapshot = max(b.oldestSnapshot, held)
	}
	return calls, maxDead, nil
}

// oldestSnapshotSQL gives the age in seconds of the oldest transaction of
// another session of this database that holds a snapshot. Such a snapshot
// keeps dead row versions from being pruned, which turns HOT updates into
// ordinary ones: the soak reports it so its figures can be read.
const oldestSnapshotSQL = `SELECT coalesce(extract(epoch FROM max(clock_timestamp() - xact_start)), 0)::float8
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL`

func (b *runner) soakFigures(runs int, calls []time.Duration, maxDead int64, before, after map[string]tableStats) {
	sec := b.r.Section("soak", "Heartbeat soak")
	sec.Shape = fmt.Sprintf("%s live runs heartbeated once a second in one call for %s; statistics read after the "+
		"writing connections closed and the counters settled; ratios: after against before",
		groupThousands(int64(runs)), b.sc.Soak)
	slices.Sort(calls)
	var total time.Duration
	for _, d := range calls {
		total += d
	}
	name := fmt.Sprintf("%s beats per call", groupThousands(int64(runs)))
	sec.Add(name, "calls", float64(len(calls)), "calls")
	sec.Add(name, "mean_call_ms", ms(total/time.Duration(max(len(calls), 1))), "ms")
	sec.Add(name, "max_call_ms", ms(calls[len(calls)-1]), "ms")
	r0, r1 := before["runs"], after["runs"]
	upd, hot := r1.Upd-r0.Upd, r1.HotUpd-r0.HotUpd
	sec.Add("runs", "updates", float64(upd), "rows")
	sec.Add("runs", "hot_update_share", 100*float64(hot)/float64(max(upd, 1)), "%").Want(">=", 95)
	b.sizeFigures(sec, "runs", r0, r1)
	sec.Add("other sessions", "oldest_snapshot_max_s", b.oldestSnapshot, "s")
	sec.Add("runs", "dead_tuples_max_during", float64(maxDead), "rows")
	// Bounded: with HOT pruning a page keeps at most the versions its spare
	// room holds, so at the end no more than one dead version per live run,
	// however many heartbeats were written.
	sec.Add("runs", "dead_tuples_per_live_run", float64(r1.Dead)/float64(runs), "rows").Want("<=", 1)
	b.sizeFigures(sec, "tasks", before["tasks"], after["tasks"])
}

// sizeFigures adds dead tuples and table and index sizes before and after.
func (b *runner) sizeFigures(sec *Section, table string, s0, s1 tableStats) {
	pairs := []struct {
		metric string
		v0, v1 int64
		unit   string
		scale  float64
	}{
		{"dead_tuples", s0.Dead, s1.Dead, "rows", 1},
		{"table_kib", s0.Size, s1.Size, "KiB", 1024},
		{"indexes_kib", s0.IndexSize, s1.IndexSize, "KiB", 1024},
	}
	for _, p := range pairs {
		f0 := *sec.Add(table, p.metric+"_before", float64(p.v0)/p.scale, p.unit)
		sec.Add(table, p.metric+"_after", float64(p.v1)/p.scale, p.unit).Against(f0)
	}
}
