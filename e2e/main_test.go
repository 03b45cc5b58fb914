package e2e

import (
	"os"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(dialEnv); addr != "" {
		os.Exit(dial(addr)) // the test binary as a boxed run's tool
	}
	if req := os.Getenv(rawRequestEnv); req != "" {
		os.Exit(rawRequest(req)) // the test binary as a client of a daemon's socket
	}
	code := m.Run()
	testkit.RemoveBuild()
	os.Exit(code)
}
