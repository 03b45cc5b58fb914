package ui

import (
	"context"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// Store is what the dashboard reads and changes in the queue: a backend's
// lease.DashboardStore (pg's, pg/dashboard.go, on connections of its own).
type Store = lease.DashboardStore

// Daemon is a daemon that shares the queue, as its row in the queue's
// daemons table says.
type Daemon struct {
	Name     string
	Host     string
	Socket   string
	StateDir string
	Agents   []string
	// SeenAgo is how long ago it last renewed its row.
	SeenAgo time.Duration
}

// OptionsFor are the options of a dashboard over b: its store, and the
// daemons sharing the queue as its name registry lists them (none when b
// keeps no names). The caller sets the rest (Listen, LogPath, Token, ...).
// A backend without a dashboard store is refused.
func OptionsFor(b *lease.Backend) (Options, error) {
	if b.Dashboard == nil {
		return Options{}, fmt.Errorf("ui: the queue at %s keeps no history for a dashboard to read; the dashboard needs a PostgreSQL queue", b.Where)
	}
	o := Options{Store: b.Dashboard}
	if names := b.Names; names != nil {
		o.Daemons = func(ctx context.Context) ([]Daemon, error) {
			ds, err := names.Daemons(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]Daemon, len(ds))
			for i, d := range ds {
				out[i] = Daemon{Name: d.Name, Host: d.Host, Socket: d.Socket, StateDir: d.StateDir, Agents: d.Agents, SeenAgo: d.SeenAgo}
			}
			return out, nil
		}
	}
	return o, nil
}
