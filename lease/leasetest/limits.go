package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func mustSetLimit(tb testing.TB, p lease.Provider, name string, rate int, per time.Duration, burst int) lease.Limit {
	tb.Helper()
	l, err := p.SetLimit(context.Background(), lease.LimitUpdate{Name: name, Rate: rate, Per: per, Burst: &burst})
	if err != nil {
		tb.Fatalf("set limit %s: %v", name, err)
	}
	return l
}

func mustLimit(tb testing.TB, p lease.Provider, name string) lease.Limit {
	tb.Helper()
	ls, err := p.Limits(context.Background())
	if err != nil {
		tb.Fatalf("list limits: %v", err)
	}
	for _, l := range ls {
		if l.Name == name {
			return l
		}
	}
	tb.Fatalf("limit %s is not listed in %+v", name, ls)
	return lease.Limit{}
}

// Ensure no window of a limit's period holds more than rate + burst
// claimed runs (one more for a closed window: the unit GCRA's boundary
// admits), however many claimers race, and that they get that many.
func testLimitRateUnderRace(t *testing.T, p lease.Provider) {
	const rate, burst, per = 20, 3, time.Second
	mustSetLane(t, p, "lim", 1000)
	for range 200 {
		mustEnqueue(t, p, task("lim", "spender"))
	}
	mustSetLimit(t, p, "api", rate, per, burst)
	f := &failures{t: t}
	var mu sync.Mutex
	var runs []int64
	var held int
	until := time.Now().Add(1500 * time.Millisecond)
	race(12, func(int) {
		cp := claimIn("lim")
		cp.Limits = []string{"api"}
		for time.Now().Before(until) {
			ls, err := p.ClaimMany(context.Background(), cp, 2)
			var h *lease.HeldError
			switch {
			case errors.As(err, &h):
				if !errors.Is(err, lease.ErrNoWork) || h.Limit != "api" || h.In < 0 || h.In > per {
					f.errorf("held claim: %v (%+v), want a wait of at most %s on api that is ErrNoWork", err, h, per)
				}
				mu.Lock()
				held++
				mu.Unlock()
				pause(h.In)
				continue
			case err != nil:
				f.errorf("claim: %v", err)
				return
			}
			mu.Lock()
			for _, l := range ls {
				runs = append(runs, l.RunID)
			}
			mu.Unlock()
		}
	})
	var starts []time.Time
	for _, id := range runs {
		starts = append(starts, MustRun(t, p, id).StartedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	worst := 0
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && !starts[j].After(starts[i].Add(per)); j++ {
			n++
		}
		worst = max(worst, n)
	}
	if worst > rate+burst+1 {
		t.Errorf("a window of %s held %d starts, more than rate %d + burst %d + the boundary's 1", per, worst, rate, burst)
	}
	// 1.5 s of a 20/s limit with a burst of 3: 1 + 3 at once, then one per
	// 50 ms; allow for claimers that slept past a unit's time.
	if len(starts) < 24 {
		t.Errorf("%d runs started in 1.5 s under a limit of %d/s and burst %d, want at least 24", len(starts), rate, burst)
	}
	if held == 0 {
		t.Errorf("no claim was held back by the limit")
	}
	t.Logf("%d starts, worst window %d, %d held claims", len(starts), worst, held)
}

// Ensure a held claim changes no task and says when the next unit is
// due, a limit that does not exist is not found, a claim's token asked
// again takes no second unit, and spent units hold later claims back.
func testLimitHoldAndSpend(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLimit(t, p, "slow", 10, time.Minute, 0) // one unit per 6 s
	if l := mustLimit(t, p, "slow"); l.Available != 1 || !l.NextUnitAt.IsZero() {
		t.Errorf("a new limit with burst 0 has %d units, next at %v; want 1 and none", l.Available, l.NextUnitAt)
	}
	a := mustEnqueue(t, p, task("slow-lane", "spender"))
	b := mustEnqueue(t, p, task("slow-lane", "spender"))
	cp := claimIn()
	cp.Limits = []string{"slow"}
	cp.Token = "limit-token-1"
	first := MustClaim(t, p, cp)
	again, err := p.ClaimMany(ctx, cp, 1)
	if err != nil || len(again) != 1 || again[0].RunID != first.RunID {
		t.Errorf("claim asked again with its token: %v, %v; want run %d again", again, err, first.RunID)
	}
	cp.Token = ""
	_, err = p.Claim(ctx, cp)
	var h *lease.HeldError
	if !errors.As(err, &h) || !errors.Is(err, lease.ErrNoWork) {
		t.Fatalf("second claim through a spent limit: %v, want a HeldError", err)
	}
	if h.In < 5*time.Second || h.In > 6*time.Second {
		t.Errorf("held for %s, want about 6 s (one unit of 10/1m)", h.In)
	}
	left := b
	if first.TaskID == b {
		left = a
	}
	if tk := MustTask(t, p, left); tk.State != lease.TaskQueued || tk.Attempts != 0 {
		t.Errorf("task %d after a held claim: %s with %d attempts, want queued with 0", left, tk.State, tk.Attempts)
	}
	l, err := p.Spend(ctx, "slow", 5)
	if err != nil {
		t.Fatalf("spend: %v", err)
	}
	if l.Available != -5 || l.NextUnitAt.IsZero() {
		t.Errorf("after spending 5 of an empty limit: %d units, next at %v; want -5 and a time", l.Available, l.NextUnitAt)
	}
	if _, err := p.Claim(ctx, cp); !errors.As(err, &h) || h.In < 35*time.Second {
		t.Errorf("claim of a limit 5 units in debt: %v, want held for at least 35 s", err)
	}
	if _, err := p.Spend(ctx, "nosuch", 1); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("spend on an unknown limit: %v, want ErrNotFound", err)
	}
	if _, err := p.Spend(ctx, "slow", 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("spend of 0 units: %v, want ErrInvalid", err)
	}
	cp.Limits = []string{"nosuch"}
	if _, err := p.Claim(ctx, cp); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("claim through an unknown limit: %v, want ErrNotFound", err)
	}
	mustSetLimit(t, p, "huge", lease.MaxLimitRate, time.Second, lease.MaxLimitBurst)
	mustEnqueue(t, p, task("huge-lane", "spender"))
	cp = claimIn("huge-lane")
	cp.Limits = []string{"huge"}
	MustClaim(t, p, cp)
	if l := mustLimit(t, p, "huge"); l.Available < lease.MaxLimitBurst {
		t.Errorf("a limit at the largest rate and burst has %d units after one claim, want at least %d", l.Available, lease.MaxLimitBurst)
	}
	burst := 2
	if _, err := p.SetLimit(ctx, lease.LimitUpdate{Name: "slow", Rate: 0, Per: time.Minute, Burst: &burst}); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("set limit with rate 0: %v, want ErrInvalid", err)
	}
}

// Ensure a deferral gives the attempt back and queues the task again after
// its delay, marks the run and counts the deferral, and that past
// MaxDeferrals the run fails instead, its attempt counted.
func testSettleDeferral(t *testing.T, p lease.Provider) {
	id := mustEnqueue(t, p, lease.EnqueueParams{Lane: "defer", Agent: "a", MaxAttempts: 2})
	cp := claimIn("defer")
	for n := 1; n <= 2; n++ {
		l := MustClaim(t, p, cp)
		if l.Attempt != 1 {
			t.Fatalf("claim after %d deferrals: attempt %d, want 1 (deferrals refund theirs)", n-1, l.Attempt)
		}
		mustSettle(t, p, lease.Deferral(l, 300*time.Millisecond, 2, "deferred for 300ms"))
		tk := MustTask(t, p, id)
		if tk.State != lease.TaskQueued || tk.Attempts != 0 || tk.Deferrals != n {
			t.Errorf("task after deferral %d: %s, %d attempts, %d deferrals; want queued, 0, %d", n, tk.State, tk.Attempts, tk.Deferrals, n)
		}
		if r := MustRun(t, p, l.RunID); r.State != lease.RunAbandoned || !r.Deferred {
			t.Errorf("deferred run: %s, deferred %v; want abandoned and deferred", r.State, r.Deferred)
		}
		mustNoWork(t, p, cp)
		time.Sleep(400 * time.Millisecond)
	}
	l := MustClaim(t, p, cp)
	mustSettle(t, p, lease.Deferral(l, time.Millisecond, 2, "deferred again"))
	r := MustRun(t, p, l.RunID)
	tk := MustTask(t, p, id)
	if r.State != lease.RunFailed || r.Deferred || !strings.Contains(r.Summary, "max_deferrals") {
		t.Errorf("deferral past the cap: run %s, deferred %v, summary %q; want failed, not deferred, naming max_deferrals", r.State, r.Deferred, r.Summary)
	}
	if tk.Attempts != 1 || tk.Deferrals != 2 || tk.State != lease.TaskQueued {
		t.Errorf("task after a capped deferral: %s, %d attempts, %d deferrals; want queued, 1, 2", tk.State, tk.Attempts, tk.Deferrals)
	}
}

// Ensure a budget stops claims of its runs once its period's usage reaches
// its max, says how much was spent and when it resumes, records the
// exhaustion once however many reports race past it, raises at once when
// its max is raised, and that usage adds up on the run.
func testBudgetStopsClaims(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	max := 3.0
	if _, err := p.SetBudget(ctx, lease.BudgetUpdate{Name: "daily", Max: &max, Period: "1d"}); err != nil {
		t.Fatalf("set budget: %v", err)
	}
	mustSetLane(t, p, "budget", 10)
	for range 6 {
		mustEnqueue(t, p, task("budget", "payer"))
	}
	cp := claimIn("budget")
	cp.Budget = "daily"
	var last *lease.Lease
	for i := range 3 {
		l := MustClaim(t, p, cp)
		for range 2 {
			if _, err := p.RecordUsage(ctx, lease.Usage{RunID: l.RunID, Budget: "daily", Amount: 0.5, Note: fmt.Sprint("call ", i)}); err != nil {
				t.Fatalf("record usage: %v", err)
			}
		}
		last = l
	}
	_, err := p.Claim(ctx, cp)
	var h *lease.HeldError
	if !errors.As(err, &h) || !errors.Is(err, lease.ErrNoWork) || h.Budget != "daily" || h.Spent != 3 || h.Max != 3 {
		t.Fatalf("claim past the budget: %v (%+v), want held by budget daily, 3 of 3", err, h)
	}
	if h.In <= 0 || h.In > lease.BudgetHoldMax || !h.Until.After(time.Now().Add(-time.Minute)) {
		t.Errorf("held until %v, in %s; want the next day's start and a wait of at most %s", h.Until, h.In, lease.BudgetHoldMax)
	}
	race(4, func(int) {
		if _, err := p.RecordUsage(ctx, lease.Usage{RunID: last.RunID, Budget: "daily", Amount: 0.25}); err != nil {
			t.Errorf("record usage past the max: %v", err)
		}
	})
	n, err := p.TakeEvents(ctx, "leasetest", []lease.NotifyRoute{{Agent: "payer", Event: lease.EventBudgetExhausted, Target: "t"}}, 100)
	if err != nil || n != 1 {
		t.Errorf("notifications of the exhausted budget: %d, %v; want 1", n, err)
	}
	if r := MustRun(t, p, last.RunID); r.Usage == nil || *r.Usage != 2 || r.UsageNote != "call 2" {
		t.Errorf("run usage %v, note %q; want 2 (0.5 + 0.5 + 4 × 0.25) and the last note", r.Usage, r.UsageNote)
	}
	bs, err := p.Budgets(ctx)
	if err != nil || len(bs) != 1 || bs[0].Spent != 4 || !bs[0].Exhausted() || bs[0].ExhaustedAt.IsZero() {
		t.Errorf("budgets: %+v, %v; want daily spent 4, exhausted", bs, err)
	}
	max = 10
	if _, err := p.SetBudget(ctx, lease.BudgetUpdate{Name: "daily", Max: &max}); err != nil {
		t.Fatalf("raise budget: %v", err)
	}
	MustClaim(t, p, cp)
	cp.Budget = "nosuch"
	if _, err := p.Claim(ctx, cp); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("claim through an unknown budget: %v, want ErrNotFound", err)
	}
	if _, err := p.RecordUsage(ctx, lease.Usage{RunID: last.RunID, Amount: -1}); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("negative usage: %v, want ErrInvalid", err)
	}
}
