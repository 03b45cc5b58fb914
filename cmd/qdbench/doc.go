// Command qdbench measures qd's queue and daemon against a PostgreSQL
// database with package bench and prints the report: a table on stdout, or
// JSON with --json, and with --out FILE the JSON in FILE too. Progress goes
// to stderr. docs/performance.md says what it measures and how to read it;
// docs/cli.md lists its flags.
//
// The database is --db, else $QD_DATABASE_URL; with neither it exits 2: it
// never falls back to qd's private cluster, since it creates and drops
// databases of its own. qdbench reads no config file. The end-to-end,
// idle and fleet parts run a qd binary as a daemon: --qd, else the qd next
// to this executable, else the first qd in PATH. The fleet part alone
// makes a private cluster of its own, whose max_connections holds its
// hundred daemons, and removes it after.
//
// Exit codes: 0 when the bench ran to the end; 1 when it failed (what it
// measured until then is still printed); 2 on bad usage, when nothing ran.
//
// qdbench is a program of its own so that the bench is not linked into qd:
// it holds only flag parsing and output, and imports nothing of cmd/qd.
package main
