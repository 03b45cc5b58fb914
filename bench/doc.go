// Package bench measures qd's queue against the database it runs on, and
// against the least a queue in that database can cost: the minimal SKIP
// LOCKED claim, one autocommit UPDATE of one row, measured in the same run
// on the same table shape. Every figure is reported as an absolute value
// and, where a reference exists, as a ratio to a figure of the same run,
// because absolute figures drift between runs and machines while ratios
// taken side by side hold.
//
// Run creates its own schemas (qd_bench_<random>_<part>), migrated by
// package pg, and drops them when it ends. It measures:
//
//   - claim: the baseline and qd's Claim at 1, 4 and 16 concurrent
//     claimers, claims/s and latency p50/p99;
//   - claim_many: ClaimMany of 8 tasks per call, tasks/s;
//   - claim_limit: qd's Claim through a rate limit no claimer reaches,
//     against the same claim without one, at 1 and 16 claimers: the cost
//     of taking a unit in the claim's transaction (docs/limits.md);
//   - cycle: a claim then the completion of its run, cycles/s;
//   - heartbeat: single and batched (100 per call) heartbeats/s, and the
//     share of the machine that 1,000 live runs beating once a second take;
//   - depth and history: claim latency with the queue deep and with many
//     finished tasks kept, against the shallowest and the empty history;
//   - soak: what heartbeating 1,000 live runs once a second does to the runs
//     table: HOT-update share, dead tuples, table and index sizes;
//   - e2e: tasks/s through `qd run` daemons with real children (a program
//     that exits at once, parallel 32, over one lane of limit 32 and over
//     64 lanes of limit 1) against a plain Go loop that fork-execs the same
//     program with the same parallelism and against River with a worker
//     that execs it (the module bench/river, built with the go command),
//     in interleaved repetitions; machine CPU, commits and busy share per
//     task, and the latency from a tick to the claim and to the child's
//     start;
//   - idle: what a daemon with 50 agents ticking every second on an empty
//     queue costs PostgreSQL (transactions per tick) and the machine (CPU,
//     memory), and its memory with 200 live children.
//
// The e2e and idle parts start the qd binary that Options.QD names as a
// daemon, with a config of their own in a temporary directory, against a
// database of their own (qd_bench_<random>_<part>) so that the server's
// counters for it count the daemon alone; they stop the daemons and drop
// the databases when they end, on error too.
//
// The command cmd/qdbench runs the bench. The qd binary must not import
// this package: the bench measures the daemon from outside, as a program
// it starts, and is not linked into it.
//
// A Report is a list of sections; later parts of the bench add their own
// sections without changing these. Its JSON field names are stable.
//
// Sizes: "small" takes seconds and exists so CI can prove the bench works;
// its figures judge nothing. "full" uses the sizes of the issue that asked
// for the bench: 10k/100k/1M queued tasks, 1M/10M finished tasks and a
// 60-second soak.
package bench
