package lease

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Budget caps what the runs of its agents spend in each calendar period,
// in the unit they report (dollars, tokens, anything): once the period's
// usage reaches Max, no run of those agents starts until the next period
// (runs in flight finish). It is checked in the claim's transaction.
type Budget struct {
	Name     string
	Max      float64
	Period   string // one of BudgetPeriods
	Timezone string // an IANA zone; the periods are calendar periods there
	SetBy    string
	Agents   []string // the agents whose daemons declared they use it
	// Filled by listings, by the provider's clock.
	Spent       float64   // usage reported in the current period
	PeriodStart time.Time // the current period's
	PeriodEnd   time.Time // the next period's start
	ExhaustedAt time.Time // when Spent reached Max in this period; zero while it has not
}

// Exhausted reports whether b has no more to spend in its period.
func (b Budget) Exhausted() bool { return b.Spent >= b.Max }

// BudgetUpdate creates or changes a budget. A nil field keeps the
// budget's (a new one needs Max and Period; Timezone defaults to UTC).
// Agents are added to the ones recorded.
type BudgetUpdate struct {
	Name     string
	Max      *float64
	Period   string
	Timezone string
	SetBy    string
	Agents   []string
}

// BudgetPeriods are the periods a budget may have: an hour, a day, a week
// (from Monday) and a month, in the budget's time zone.
var BudgetPeriods = []string{"1h", "1d", "1w", "1mo"}

// MaxUsage caps one usage report and a budget's max.
const MaxUsage = 1e15

// ValidateBudget checks u.
func ValidateBudget(u BudgetUpdate) error {
	if !ValidName(u.Name) {
		return fmt.Errorf("%w: budget %q does not match %s", ErrInvalid, u.Name, LanePattern)
	}
	if u.Max != nil && (math.IsNaN(*u.Max) || *u.Max < 0 || *u.Max > MaxUsage) {
		return fmt.Errorf("%w: budget %s: max %g is out of range: from 0 to %g", ErrInvalid, u.Name, *u.Max, float64(MaxUsage))
	}
	if u.Period != "" && !slices.Contains(BudgetPeriods, u.Period) {
		return fmt.Errorf("%w: budget %s: period %q is not one of 1h, 1d, 1w, 1mo", ErrInvalid, u.Name, u.Period)
	}
	if u.Timezone != "" {
		if _, err := time.LoadLocation(u.Timezone); err != nil {
			return fmt.Errorf("%w: budget %s: timezone %q is not a time zone this host knows", ErrInvalid, u.Name, u.Timezone)
		}
	}
	for _, a := range u.Agents {
		if !ValidName(a) {
			return fmt.Errorf("%w: budget %s: agent %q does not match %s", ErrInvalid, u.Name, a, LanePattern)
		}
	}
	return nil
}

// CheckUsage refuses a usage report that is not a number from 0 to
// MaxUsage.
func CheckUsage(amount float64) error {
	if math.IsNaN(amount) || math.IsInf(amount, 0) || amount < 0 || amount > MaxUsage {
		return fmt.Errorf("%w: usage %g is out of range: a number from 0 to %g", ErrInvalid, amount, float64(MaxUsage))
	}
	return nil
}

// BudgetPeriod returns the calendar period of at in zone loc: its start
// and the next one's.
func BudgetPeriod(period string, loc *time.Location, at time.Time) (start, end time.Time) {
	t := at.In(loc)
	y, m, d := t.Date()
	switch period {
	case "1h":
		start = time.Date(y, m, d, t.Hour(), 0, 0, 0, loc)
		return start, start.Add(time.Hour)
	case "1w":
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case "1mo":
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		return start, time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default: // 1d
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
}

// BudgetHoldMax bounds how long a claim held back by a budget waits
// before it asks again: a `qd budget set` that raises the max reaches
// every daemon within it.
const BudgetHoldMax = 5 * time.Second

// Usage is what a run reports it spent (`qd usage 0.12 --note ...`),
// added to the run's usage and, when its agent has one, to its budget's
// period.
type Usage struct {
	RunID  int64
	Budget string // "" when the agent has none
	Amount float64
	Note   string
}
