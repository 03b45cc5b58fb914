// Package leasetest is the conformance suite of lease.Provider. Run executes
// every invariant of package lease, and the rest of the Provider contract,
// as named subtests against any backend: a backend is trusted once it passes
// the suite unchanged.
//
// Leases follow the provider's clock, so the suite uses short real leases
// (about a second) and sleeps past them instead of faking time. Concurrency
// is real: dozens of goroutines race claims, heartbeats and settlements, and
// independent trackers in the test check exclusivity and lane bounds.
package leasetest
