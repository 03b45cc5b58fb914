package pg_test

import (
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/leasetest"
)

// Ensure the PostgreSQL provider passes the conformance suite, each
// subtest on its own schema.
func TestProvider_Conformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Provider { return MustOpen(t) })
}
