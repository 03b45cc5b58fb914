package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qd-run/qd/api"
)

// viaSocket reports whether a command should go to the daemon's socket:
// inside an agent run by `qd run`, QD_SOCKET is set and no database URL is
// given (children never get one).
func viaSocket(env *Env) (string, bool) {
	sock := env.Getenv("QD_SOCKET")
	if sock == "" || env.DatabaseURL != "" || env.Getenv("QD_DATABASE_URL") != "" {
		return "", false
	}
	return sock, true
}

// socketProgress tells the daemon at sock that the child of run id made
// progress: it counts as output for the agent's stall_timeout. The daemon
// keeps the lease itself. A daemon that does not run the run answers like
// a lost lease (exit 4); a refusal (a run may report progress only for
// itself) is an error (exit 1).
func socketProgress(ctx context.Context, env *Env, sock string, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := env.socketClient(sock).Progress(ctx, id)
	if errors.Is(err, api.ErrUnknownRun) {
		return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("heartbeat run %d: the daemon at %s is not running it", id, sock)}
	}
	if err != nil {
		return fmt.Errorf("heartbeat run %d through the daemon socket: %w", id, err)
	}
	return nil
}
