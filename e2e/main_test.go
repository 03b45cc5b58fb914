package e2e

import (
	"os"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBuild()
	os.Exit(code)
}
