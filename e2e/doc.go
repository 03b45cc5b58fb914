// Package e2e tests the qd binary end to end: real daemons started with
// `qd run` against a real PostgreSQL, running small agent scripts.
package e2e
