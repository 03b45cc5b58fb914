// Package model holds a Promela model of qd's lease protocol (lease.pml)
// and the test that checks it: the model must verify, and each deliberately
// broken variant of it must be caught with a counterexample. It has no Go
// code of its own; docs/model.md says what the model covers.
package model
