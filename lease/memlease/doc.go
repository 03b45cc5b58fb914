// Package memlease is an in-memory lease.Provider. It keeps every rule of the
// lease contract (lane limits and pauses, claim order, reaping on claim,
// fencing, idempotent settlement, backoff, cancel, retry, prune and periodic
// ticks) behind one mutex, and its clock is the process's monotonic clock.
// It passes leasetest.Run unchanged and is meant for unit tests of the
// packages that consume a Provider; nothing survives the process.
package memlease
