package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// figures gathers the counters of every scenario for the closing report.
type figures struct {
	mu            sync.Mutex
	faults        map[string]int
	tasks, runs   int
	reruns        int
	lost          int
	duplicates    int
	pauseOverlaps int
	pauseMax      time.Duration
	worstLane     string
	worstOcc      int
	worstLimit    int
	lanesOver     int
	staleRejected int
	staleApplied  int
	orphans       int
	secrets       int
	badRejected   int
	badTotal      int
	maxRSS        int64 // KiB
	recovery      []time.Duration
	slowest       time.Duration // the slowest recovery, and after what
	slowestAfter  string
	// restoreLost counts tasks enqueued after a failover's restored copy
	// was taken, which the copy cannot know: lost by the restore itself,
	// not by qd.
	restoreLost int
	drains      []string // how long the many-lanes scenarios took to drain
	clockShifts []string // what clock jumps did to ticks
	// notes are the notification scenarios' figures; notesLost and
	// notesDups count notifications never told and told twice.
	notes                []string
	notesLost, notesDups int

	// hostileSent counts a hostile agent's socket requests at other runs,
	// hostileRefused those refused, hostileEffects what any of them
	// changed of those runs.
	hostileSent, hostileRefused, hostileEffects int

	// chains counts the chains of the chain scenarios, chainEarly the
	// runs of a dependent that started before every task it waits for
	// had ended done, chainStuck the dependents left waiting.
	chains, chainEarly, chainStuck int
	// chainGap is the shortest time from the end of a dependent's last
	// parent to the start of its first run.
	chainGap time.Duration

	// limits are the rate limit scenarios' figures.
	limits []string
}

var fig = &figures{faults: map[string]int{}}

func (f *figures) fault(kind string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind] += n
}

func (f *figures) add(fn func(f *figures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// lane records a lane's worst occupancy; the worst ratio is kept.
func (f *figures) lane(name string, occ, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if occ > limit {
		f.lanesOver++
	}
	worse := occ*f.worstLimit > f.worstOcc*limit
	tie := occ*f.worstLimit == f.worstOcc*limit && limit > f.worstLimit
	if f.worstLimit == 0 || worse || tie {
		f.worstLane, f.worstOcc, f.worstLimit = name, occ, limit
	}
}

// recovered records a recovery latency d after the fault named by after
// (the test's or the fault's name), so that the slowest can be told.
func (f *figures) recovered(after string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recovery = append(f.recovery, d)
	if d > f.slowest {
		f.slowest, f.slowestAfter = d, after
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// report prints the table, then the one summary line, last.
func (f *figures) report(w io.Writer, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := make([]string, 0, len(f.faults))
	total := 0
	for k, n := range f.faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(kinds)
	p50, p99 := percentile(f.recovery, 0.50), percentile(f.recovery, 0.99)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nqd fault suite figures (seed %d)\n", seed)
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\n", k, v) }
	row("faults injected", fmt.Sprintf("%d (%s)", total, strings.Join(kinds, ", ")))
	row("tasks / runs", fmt.Sprintf("%d / %d", f.tasks, f.runs))
	row("re-runs after reap", f.reruns)
	row("lost tasks", f.lost)
	row("concurrent duplicates", f.duplicates)
	row("pause-window overlaps", fmt.Sprintf("%d, max %s", f.pauseOverlaps, f.pauseMax.Round(time.Millisecond)))
	row("worst lane occupancy", fmt.Sprintf("%d/%d (%s)", f.worstOcc, f.worstLimit, f.worstLane))
	row("stale writes rejected / applied", fmt.Sprintf("%d / %d", f.staleRejected, f.staleApplied))
	row("orphan processes left", f.orphans)
	row("secrets found", f.secrets)
	row("bad inputs rejected", fmt.Sprintf("%d/%d", f.badRejected, f.badTotal))
	row("daemon RSS max under flood", fmt.Sprintf("%d MiB", f.maxRSS/1024))
	row("lost by a restore itself (async failover)", f.restoreLost)
	row("hostile socket requests refused, effects on other runs", fmt.Sprintf("%d/%d, %d", f.hostileRefused, f.hostileSent, f.hostileEffects))
	row("chains: dependents started early / left waiting", fmt.Sprintf("%d / %d (of %d chains; shortest gap parent end → dependent start %s)",
		f.chainEarly, f.chainStuck, f.chains, f.chainGap.Round(time.Millisecond)))
	for _, d := range f.drains {
		row("drain time", d)
	}
	for _, n := range f.notes {
		row("notifications", n)
	}
	row("notifications lost / told twice", fmt.Sprintf("%d / %d", f.notesLost, f.notesDups))
	for _, l := range f.limits {
		row("rate limit", l)
	}
	for _, c := range f.clockShifts {
		row("clock jump", c)
	}
	row("recovery latency p50 / p99", fmt.Sprintf("%s / %s (n=%d; slowest %s, after %s)", p50.Round(time.Millisecond),
		p99.Round(time.Millisecond), len(f.recovery), f.slowest.Round(time.Millisecond), f.slowestAfter))
	tw.Flush()
	verdict := "PASS"
	if code != 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "faults: %s seed=%d faults=%d tasks=%d runs=%d reruns=%d lost=%d duplicates=%d lanes_over=%d stale_applied=%d orphans=%d secrets=%d bad_rejected=%d/%d recovery_p50=%s p99=%s\n",
		verdict, seed, total, f.tasks, f.runs, f.reruns, f.lost, f.duplicates, f.overLanes(), f.staleApplied, f.orphans, f.secrets,
		f.badRejected, f.badTotal, p50.Round(time.Millisecond), p99.Round(time.Millisecond))
}

func (f *figures) overLanes() int { return f.lanesOver }
