package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options configures Run.
type Options struct {
	// DatabaseURL names the database. Run creates its own schemas in it
	// (qd_bench_<random>_<part>) and drops them when it ends; any schema
	// parameter in the URL is ignored.
	DatabaseURL string
	// Size is "small" (seconds in total, for CI) or "full" (the sizes of
	// the issue: 10k/100k/1M queued, 1M/10M finished, a 60 s soak).
	// Empty means small.
	Size string
	// Duration of each timed measurement; zero takes the size's default.
	Duration time.Duration
	// Logger receives progress; nil discards it.
	Logger hclog.Logger
	// QD is the path of the qd binary the end-to-end and idle parts start
	// as a daemon (`qd run`). It is required: the bench is not linked into
	// qd, so it has no daemon of its own to run.
	QD string
	// ID names this run's schemas and databases (qd_bench_<ID>_<part>);
	// empty means a random one.
	ID string
	// River is the directory of the River peer's module (bench/river of a
	// checkout); empty means bench/river under the working directory. The
	// bench builds it with the go command, and leaves River out of the
	// comparison (saying why) when it cannot.
	River string
	// Only names the parts to run (claims, heartbeats, depth, history,
	// soak, e2e, idle, fleet, children); empty runs them all.
	Only []string
	// Children is how many live children the children part holds; zero
	// takes the size's (500 small, 10,000 full).
	Children int
}

// scale is the shape of one bench size.
type scale struct {
	Name       string
	Measure    time.Duration // per timed measurement
	Lanes      int           // lanes of the claim measurements
	Queued     int           // queued tasks at the start of each claim measurement
	LiveRuns   int           // live runs of the heartbeat measurements (≥ 16×100)
	DepthLanes int           // lanes of the depth and history series
	Depths     []int         // queued tasks of the depth series, smallest first
	DepthBase  int           // queued tasks beside the history series
	Histories  []int         // finished tasks (each with one run) of the history series
	DepthOps   int           // timed claims per depth or history point
	SoakRuns   int           // live runs of the heartbeat soak
	Soak       time.Duration // length of the heartbeat soak
	BatchBeats int           // heartbeats per call in the batched measurement
	ClaimBatch int           // n of ClaimMany
	// LatencyTicks is how many ticks the tick-to-exec latency is taken
	// over (32 tasks each).
	LatencyTicks int
	// E2ETasks is the backlog each runner of the end-to-end comparison
	// works through; E2EReps how many interleaved repetitions it makes.
	E2ETasks, E2EReps int
	// Idle is how long the idle daemon is watched, after IdleWarmup.
	Idle, IdleWarmup time.Duration
	// Laptop is how long the daemon on its private cluster is watched,
	// after LaptopWarmup.
	Laptop, LaptopWarmup time.Duration
	// Children is how many live children one daemon holds, each with a
	// lease of ChildrenLease, idle for ChildrenIdle at a quarter of them
	// and again at all.
	Children      int
	ChildrenLease time.Duration
	ChildrenIdle  time.Duration
}

var scales = map[string]scale{
	"small": {
		Name: "small", Measure: 400 * time.Millisecond,
		Lanes: 1_000, Queued: 30_000, LiveRuns: 1_600,
		DepthLanes: 100, Depths: []int{10_000, 50_000, 100_000}, DepthBase: 10_000, Histories: []int{0, 20_000, 100_000}, DepthOps: 300,
		SoakRuns: 1_000, Soak: 3 * time.Second, BatchBeats: 100, ClaimBatch: 8,
		LatencyTicks: 2, E2ETasks: 1_500, E2EReps: 1, Idle: 3 * time.Second, IdleWarmup: 1500 * time.Millisecond,
		Laptop: 10 * time.Second, LaptopWarmup: 5 * time.Second,
		Children: 500, ChildrenLease: 6 * time.Second, ChildrenIdle: 8 * time.Second,
	},
	"full": {
		Name: "full", Measure: 5 * time.Second,
		Lanes: 1_000, Queued: 100_000, LiveRuns: 1_600,
		DepthLanes: 100, Depths: []int{10_000, 100_000, 1_000_000}, DepthBase: 10_000, Histories: []int{0, 1_000_000, 10_000_000}, DepthOps: 3_000,
		SoakRuns: 1_000, Soak: 60 * time.Second, BatchBeats: 100, ClaimBatch: 8,
		LatencyTicks: 10, E2ETasks: 20_000, E2EReps: 3, Idle: 20 * time.Second, IdleWarmup: 12 * time.Second,
		Laptop: 2 * time.Minute, LaptopWarmup: 30 * time.Second,
		Children: 10_000, ChildrenLease: 30 * time.Second, ChildrenIdle: 40 * time.Second,
	},
}

// Parts lists the names Options.Only accepts, in the order they run.
func Parts() []string {
	return []string{"claims", "heartbeats", "depth", "history", "soak", "e2e", "idle", "fleet", "children"}
}

// Sizes lists the names Options.Size accepts.
func Sizes() []string { return []string{"small", "full"} }

func (o Options) scale() (scale, error) {
	if o.QD == "" {
		return scale{}, errors.New("bench: Options.QD names no qd binary to run as the daemon")
	}
	name := o.Size
	if name == "" {
		name = "small"
	}
	sc, ok := scales[name]
	if !ok {
		return scale{}, fmt.Errorf("bench size %q: want small or full", o.Size)
	}
	for _, p := range o.Only {
		if !slices.Contains(Parts(), p) {
			return scale{}, fmt.Errorf("bench part %q: want one of %s", p, strings.Join(Parts(), ", "))
		}
	}
	if o.Duration > 0 {
		sc.Measure = o.Duration
	}
	return sc, nil
}
