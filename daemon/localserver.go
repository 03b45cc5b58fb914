package daemon

import (
	"context"
	"time"
)

// LocalServer is a database server whose life is the daemon's: the private
// PostgreSQL cluster of state_dir/pg, when no database is configured.
// cmd/qd makes it from the cluster; the daemon only calls these.
type LocalServer struct {
	// Name says which server, in the log ("the private PostgreSQL in DIR").
	Name string
	// Died reports, quickly and starting nothing, whether the server went
	// away without being stopped (killed, crashed). One stopped on
	// purpose (qd db stop) is left stopped.
	Died func() bool
	// Await, when not nil, returns when the server may have died, ctx
	// ends or the duration has passed, and wakes nothing meanwhile: the
	// daemon then waits on it instead of looking every serverCheckEvery.
	Await func(ctx context.Context, d time.Duration)
	// Start starts it again.
	Start func(ctx context.Context) error
	// Stop, when not nil, stops it cleanly once the daemon has drained:
	// its children gone, their runs settled, its queue closed. Under a
	// service manager the server is a process of the daemon's unit, which
	// the manager kills once the daemon exits (systemd's KillMode=mixed):
	// it must be stopped first. Nil leaves it running after the daemon.
	Stop func(ctx context.Context) error
}

// serverCheckEvery is how often the daemon looks whether its local server
// died, when the server offers no Await. A look reads a file and two /proc
// entries; a restart after a kill takes well under a second more.
const serverCheckEvery = 250 * time.Millisecond

// serverAwaitMax is the longest the daemon waits on a server's Await
// before it looks anyway: what Await cannot see (a socket file removed
// under a live server) is seen within it.
const serverAwaitMax = 30 * time.Second

// serverStopWait bounds the clean stop at the end.
const serverStopWait = time.Minute

// keepServer starts s again whenever it dies, until the function it
// returns is called: that one stops watching, closes the queue (which
// gives back what it still holds, in the server) and then stops s when
// the daemon owns it.
func (d *daemon) keepServer(s *LocalServer, closeQueue func()) (release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.watchServer(ctx, s)
	}()
	return func() {
		cancel()
		<-done
		closeQueue()
		if s.Stop == nil {
			return
		}
		log := d.logger.Named("database")
		log.Info("stopping " + s.Name)
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), serverStopWait)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			log.Error("could not stop "+s.Name, "error", err)
			return
		}
		log.Info("stopped "+s.Name, "took", time.Since(t0).Round(time.Millisecond))
	}
}

// watchServer waits on s (or looks at it every serverCheckEvery) and
// starts it when it died; failed starts are tried again less and less
// often, up to every 30 s.
func (d *daemon) watchServer(ctx context.Context, s *LocalServer) {
	log := d.logger.Named("database")
	wait := serverCheckEvery
	for {
		if s.Await != nil && wait == serverCheckEvery {
			s.Await(ctx, serverAwaitMax)
		} else {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !s.Died() {
			wait = serverCheckEvery
			continue
		}
		log.Warn(s.Name + " died; starting it again")
		t0 := time.Now()
		if err := s.Start(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = min(max(2*wait, time.Second), 30*time.Second)
			log.Error("could not start "+s.Name+" again", "error", err, "next_try", wait)
			continue
		}
		wait = serverCheckEvery
		log.Info("started "+s.Name+" again", "took", time.Since(t0).Round(time.Millisecond))
	}
}
