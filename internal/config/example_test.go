package config

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

const examplePath = "../../config.example.hcl"

func TestLoad_Example(t *testing.T) {
	t.Run("CopiedAnywhere", func(t *testing.T) {
		// Ensure config.example.hcl is valid as shipped, wherever it is
		// copied (/etc/qd, say): its agents name programs every host has,
		// and no database, so that qd uses its private cluster.
		dir := t.TempDir()
		src, err := os.ReadFile(examplePath)
		if err != nil {
			t.Fatal(err)
		}
		MustWrite(t, filepath.Join(dir, "qd.hcl"), string(src), 0o644)
		c := MustLoad(t, filepath.Join(dir, "qd.hcl"))
		hello := c.Agent("hello")
		if hello == nil || c.Agent("progress") == nil || len(c.Agents) != 2 || len(c.Periodics) != 1 {
			t.Fatalf("got agents %+v and periodics %+v, want hello, progress and one periodic", c.Agents, c.Periodics)
		}
		if c.Database != "" {
			t.Errorf("the example sets database %q; it should leave it commented out, for the private cluster", c.Database)
		}
		if hello.Lease != 5*time.Minute || hello.Heartbeat != 100*time.Second || c.Periodics[0].Agent != "hello" {
			t.Errorf("hello: got lease %s, heartbeat %s; periodic agent %q", hello.Lease, hello.Heartbeat, c.Periodics[0].Agent)
		}
	})
	t.Run("InPlace", func(t *testing.T) {
		MustLoad(t, examplePath)
	})
	t.Run("DocumentsEveryField", func(t *testing.T) {
		// Ensure every setting qd accepts is shown in the example, set or
		// commented out.
		src, err := os.ReadFile(examplePath)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*hcl.BodySchema{rootSchema, agentSchema, periodicSchema, uiSchema, sandboxSchema, limitSchema, budgetSchema} {
			for _, a := range s.Attributes {
				re := regexp.MustCompile(`(?m)^\s*(#\s*)?` + a.Name + `\s*=`)
				if !re.Match(src) {
					t.Errorf("%s is not in config.example.hcl", a.Name)
				}
			}
		}
	})
}

// MustWrite writes a file, creating its directory.
func MustWrite(tb testing.TB, path, content string, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		tb.Fatal(err)
	}
}
