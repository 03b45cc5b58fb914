package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// riverResult is what the River peer (bench/river) prints.
type riverResult struct {
	Jobs       int       `json:"jobs"`
	Rate       float64   `json:"rate_per_second"`
	SteadyFrom time.Time `json:"steady_from"`
	SteadyTo   time.Time `json:"steady_to"`
	SteadyJobs int       `json:"steady_jobs"`
	Wall       float64   `json:"wall_seconds"`
	MachineCPU float64   `json:"machine_cpu_seconds"`
	Idle       float64   `json:"machine_idle_seconds"`
	Commits    int64     `json:"commits"`
	// River's own share, measured by the peer: its process, the children
	// it ran, and the backends of its working pool.
	ProcessCPU  float64 `json:"process_cpu_seconds"`
	ChildrenCPU float64 `json:"children_cpu_seconds"`
	BackendsCPU float64 `json:"backends_cpu_seconds"`
	Backends    int     `json:"backends"`
}

// riverDir is the module of the River peer: Options.River, else
// bench/river under the working directory (a checkout of qd).
func (b *runner) riverDir() string {
	if b.o.River != "" {
		return b.o.River
	}
	return filepath.Join("bench", "river")
}

// buildRiver builds the River peer into a temporary directory and returns
// the binary, or "" and why River is left out of the comparison (no go
// command, no checkout of the module, a failed build).
func (b *runner) buildRiver(ctx context.Context) (bin, skip string) {
	dir := b.riverDir()
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		skip = fmt.Sprintf("River not measured: no module at %s (run qdbench from a checkout of qd, or give --river DIR)", dir)
		b.log.Warn(skip)
		return "", skip
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		skip = "River not measured: no go command in PATH to build " + dir
		b.log.Warn(skip)
		return "", skip
	}
	tmp, err := os.MkdirTemp("", "qd-bench-river-")
	if err != nil {
		skip = fmt.Sprintf("River not measured: %v", err)
		b.log.Warn(skip)
		return "", skip
	}
	b.cleanup = append(b.cleanup, func() { os.RemoveAll(tmp) })
	bin = filepath.Join(tmp, "river")
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	b.log.Info("building the River peer", "dir", dir)
	if err := cmd.Run(); err != nil {
		skip = fmt.Sprintf("River not measured: go build in %s: %v: %s", dir, err, bytes.TrimSpace(out.Bytes()))
		b.log.Warn(skip)
		return "", skip
	}
	return bin, ""
}

// runRiver runs the River peer over n jobs in a database of its own.
func (b *runner) runRiver(ctx context.Context, db *database, bin, prog string, n int) (peerResult, error) {
	b.rivers++
	name := "qd_bench_" + b.id + "_river" + strconv.Itoa(b.rivers)
	if _, err := db.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return peerResult{}, fmt.Errorf("create database %s: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := db.admin.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			b.log.Warn("cannot drop bench database; drop it by hand", "database", name, "error", err)
		}
	}()
	u := *db.base
	u.Path = "/" + name
	q := u.Query()
	q.Set("application_name", "qd-bench-river")
	u.RawQuery = q.Encode()
	cmd := exec.CommandContext(ctx, bin, "--db", u.String(), "--jobs", strconv.Itoa(n),
		"--workers", strconv.Itoa(e2eParallel), "--payload", e2ePayload, prog)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	b.log.Info("River peer", "jobs", n)
	off, err := db.clockOffset(ctx)
	if err != nil {
		return peerResult{}, err
	}
	sampler := sampleMachine()
	err = cmd.Run()
	serr := sampler.stop()
	if err != nil {
		return peerResult{}, fmt.Errorf("River peer %s: %w: %s", bin, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var rr riverResult
	if err := json.Unmarshal(stdout.Bytes(), &rr); err != nil {
		return peerResult{}, fmt.Errorf("River peer printed %q: %w", stdout.String(), err)
	}
	if rr.Jobs != n || rr.Rate <= 0 {
		return peerResult{}, errors.New("River peer printed no rate: " + stdout.String())
	}
	if serr != nil {
		return peerResult{}, serr
	}
	st := steady{Rate: rr.Rate, From: rr.SteadyFrom.Add(-off), To: rr.SteadyTo.Add(-off), Tasks: rr.SteadyJobs}
	r := peerResult{Tasks: rr.Jobs, steady: st, Wall: seconds(rr.Wall), Commits: rr.Commits}
	r.cost = cost{Daemon: seconds(rr.ProcessCPU), Children: seconds(rr.ChildrenCPU), Postgres: seconds(rr.BackendsCPU), Xacts: rr.Commits, Sent: -1, Commits: rr.Commits}
	if r.machine, err = sampler.between(st.From, st.To); err != nil {
		return r, fmt.Errorf("River peer: %w", err)
	}
	b.log.Info("measured", "what", "River", "jobs", n, "per_second", int(r.Rate), "machine_cpu_ms_per_task", r.cpuPerTask(),
		"busy", r.machine.busyShare(), "commits", r.Commits,
		"process_cpu", r.Daemon, "children_cpu", r.Children, "postgres_cpu", r.Postgres, "backends", rr.Backends)
	return r, nil
}

// seconds is s seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
