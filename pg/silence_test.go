package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure the summary reap_lane writes on an expired run is the text of
// lease.SilenceSummary, the one the in-memory provider writes: the silence
// since the last heartbeat, rounded to the second.
func TestSilenceSummary(t *testing.T) {
	tests := []struct {
		silent time.Duration
		want   string
	}{
		{200 * time.Millisecond, "lease expired: silent for 0s"},
		{1300 * time.Millisecond, "lease expired: silent for 1s"},
		{1700 * time.Millisecond, "lease expired: silent for 2s"},
		{59600 * time.Millisecond, "lease expired: silent for 60s"},
		{25*time.Hour + time.Minute + 1200*time.Millisecond, "lease expired: silent for 90061s"},
		{40*24*time.Hour + 300*time.Millisecond, "lease expired: silent for 3456000s"},
	}
	p := MustOpen(t)
	ctx := context.Background()
	s := p.Schema()
	for _, tt := range tests {
		if got := lease.SilenceSummary(tt.silent); got != tt.want {
			t.Errorf("SilenceSummary(%s) = %q, want %q", tt.silent, got, tt.want)
		}
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "s", Agent: "a"})
		l := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"s"}, Owner: "o", Lease: time.Hour})
		_, err := p.Pool().Exec(ctx, `UPDATE `+s+`.runs SET last_heartbeat_at = clock_timestamp() - $2::interval,
			lease_expires_at = clock_timestamp() - interval '1 millisecond' WHERE id = $1`, l.RunID, tt.silent)
		if err != nil {
			t.Fatal(err)
		}
		var reaped int
		if err := p.Pool().QueryRow(ctx, `SELECT `+s+`.reap_lane('s')`).Scan(&reaped); err != nil || reaped != 1 {
			t.Fatalf("reap_lane: %d, %v; want 1 run reaped", reaped, err)
		}
		// The silence the reaper saw: finished_at is read from the clock
		// in the same update as the summary.
		var summary string
		var seen time.Duration
		err = p.Pool().QueryRow(ctx, `SELECT summary, finished_at - last_heartbeat_at FROM `+s+`.runs WHERE id = $1`,
			l.RunID).Scan(&summary, &seen)
		if err != nil {
			t.Fatal(err)
		}
		if want := lease.SilenceSummary(seen); summary != want || summary != tt.want {
			t.Errorf("reap_lane after %s (seen %s) wrote %q, want %q", tt.silent, seen, summary, want)
		}
	}
}
