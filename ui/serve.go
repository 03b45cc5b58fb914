package ui

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve answers h on ln until ctx ends, then closes the live streams and
// waits up to two seconds for the other requests to finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	cancel() // ends the event streams, which never end on their own
	sctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	err := srv.Shutdown(sctx)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) && e != nil {
		return e
	}
	return err
}
