package leasetest_test

import (
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/leasetest"
	"github.com/qd-run/qd/lease/memlease"
)

// Ensure the in-memory provider passes the conformance suite.
func TestMemlease(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Provider {
		p := memlease.New()
		t.Cleanup(p.Close)
		return p
	})
}
