package lease

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limit is a rate limit that every claimer shares: at most Rate units in
// any window of length Per, plus Burst. A claim that names it takes one
// unit for each run it makes, in the claim's transaction; a run may spend
// more afterwards (Spend), which may leave the limit owing units.
//
// The algorithm is GCRA (docs/limits.md): the limit keeps a theoretical
// arrival time (TAT); a unit is admitted at now when TAT - Burst×E <= now,
// where E = Per/Rate (Emission), and taking n units moves TAT to
// max(TAT, now) + n×E. A half-open window [t, t+Per) then never holds
// more than Rate+Burst admissions; a closed one may hold one more.
type Limit struct {
	Name  string
	Rate  int
	Per   time.Duration
	Burst int
	// SetBy says who set the limit last: `qd limit set` or a daemon's
	// config.
	SetBy string
	// Agents are the agents whose daemons declared they use it.
	Agents []string
	// Filled by listings and by Spend, by the provider's clock.
	Available  int       // units that may be taken now; negative when owed
	NextUnitAt time.Time // when Available next grows by one; zero when full
}

// LimitUpdate creates or changes a limit. Rate and Per are required; a
// nil Burst keeps the limit's (0 for a new one). Agents are added to the
// ones recorded.
type LimitUpdate struct {
	Name   string
	Rate   int
	Per    time.Duration
	Burst  *int
	SetBy  string
	Agents []string
}

// The ranges of a limit, as every provider stores them.
const (
	MaxLimitRate  = math.MaxInt32
	MaxLimitBurst = math.MaxInt32
	// MaxSpend caps one Spend: more units than that in one call is a bug
	// of the caller, not a use.
	MaxSpend = 1 << 31
	// MaxLimitPer caps a limit's period.
	MaxLimitPer = 366 * 24 * time.Hour
)

// HeldError is a claim's answer when a limit it names had no unit to give,
// or its budget was spent: nothing was claimed. For a limit, its next
// unit is due at Until, by the provider's clock, In from the claim; for a
// budget (Budget set, Spent of Max), its next period starts at Until, and
// In is at most BudgetHoldMax, so that a raised max is seen soon.
// errors.Is(err, ErrNoWork) holds.
type HeldError struct {
	Limit      string
	Budget     string
	Spent, Max float64
	Until      time.Time
	In         time.Duration
}

func (e *HeldError) Error() string {
	if e.Budget != "" {
		return fmt.Sprintf("budget %q spent %g of %g; resumes %s", e.Budget, e.Spent, e.Max,
			e.Until.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return fmt.Sprintf("limit %q has no unit to give: the next is due at %s (in %s)", e.Limit,
		e.Until.UTC().Format(time.RFC3339Nano), e.In.Round(time.Millisecond))
}

// Is makes a held claim a claim that found nothing.
func (e *HeldError) Is(target error) bool { return target == ErrNoWork }

// Emission is the time one unit of the limit stands for: Per/Rate,
// rounded up to the microsecond (the resolution of PostgreSQL's times),
// so that rounding never lets a unit in early.
func Emission(rate int, per time.Duration) time.Duration {
	us := (per.Microseconds() + int64(rate) - 1) / int64(rate)
	return time.Duration(max(us, 1)) * time.Microsecond
}

// LimitUnits returns how many units a limit whose theoretical arrival
// time is tat has at now (negative when owed), and when that grows by one
// (zero when it is full, at Burst+1).
func LimitUnits(tat, now time.Time, emission time.Duration, burst int) (int, time.Time) {
	ahead := max(tat.Sub(now), 0)
	n := int64((time.Duration(burst+1)*emission - ahead).Microseconds())
	e := emission.Microseconds()
	units := n / e
	if n < 0 && n%e != 0 {
		units-- // floor, not truncation
	}
	if units >= int64(burst)+1 {
		return burst + 1, time.Time{}
	}
	return int(units), tat.Add(-time.Duration(int64(burst)-units) * emission)
}

// ParseRate reads a rate such as "60/1m" or "10/1s": a whole number of
// units above zero, a slash, and a positive Go duration.
func ParseRate(s string) (rate int, per time.Duration, err error) {
	n, d, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("%w: rate %q is not UNITS/PERIOD, such as \"60/1m\"", ErrInvalid, s)
	}
	rate, err = strconv.Atoi(strings.TrimSpace(n))
	if err != nil || rate < 1 || rate > MaxLimitRate {
		return 0, 0, fmt.Errorf("%w: rate %q: the units must be a whole number from 1 to %d, such as \"60/1m\"",
			ErrInvalid, s, MaxLimitRate)
	}
	per, err = time.ParseDuration(strings.TrimSpace(d))
	if err != nil || per < time.Millisecond || per > MaxLimitPer {
		return 0, 0, fmt.Errorf("%w: rate %q: the period must be a duration from 1ms to %s, such as \"1m\"",
			ErrInvalid, s, MaxLimitPer)
	}
	return rate, per, nil
}

// FormatRate writes a rate as ParseRate reads it.
func FormatRate(rate int, per time.Duration) string {
	return strconv.Itoa(rate) + "/" + shortDuration(per)
}

func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ValidateLimit checks u.
func ValidateLimit(u LimitUpdate) error {
	if !ValidName(u.Name) {
		return fmt.Errorf("%w: limit %q does not match %s", ErrInvalid, u.Name, LanePattern)
	}
	if u.Rate < 1 || u.Rate > MaxLimitRate || u.Per < time.Millisecond || u.Per > MaxLimitPer {
		return fmt.Errorf("%w: limit %s: rate %d per %s is out of range", ErrInvalid, u.Name, u.Rate, u.Per)
	}
	if u.Burst != nil && (*u.Burst < 0 || *u.Burst > MaxLimitBurst) {
		return fmt.Errorf("%w: limit %s: burst %d is out of range: it must be between 0 and %d", ErrInvalid, u.Name,
			*u.Burst, MaxLimitBurst)
	}
	for _, a := range u.Agents {
		if !ValidName(a) {
			return fmt.Errorf("%w: limit %s: agent %q does not match %s", ErrInvalid, u.Name, a, LanePattern)
		}
	}
	return nil
}

// CheckSpend refuses a number of units to spend outside 1..MaxSpend.
func CheckSpend(name string, units int64) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: limit %q does not match %s", ErrInvalid, name, LanePattern)
	}
	if units < 1 || units > MaxSpend {
		return fmt.Errorf("%w: units %d to spend on limit %s are out of range: from 1 to %d", ErrInvalid, units, name,
			int64(MaxSpend))
	}
	return nil
}
