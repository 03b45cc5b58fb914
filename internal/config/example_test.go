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
	t.Run("StubAgents", func(t *testing.T) {
		// Ensure config.example.hcl is valid as shipped, with its example
		// agents resolved next to the file wherever it is copied.
		dir := t.TempDir()
		src, err := os.ReadFile(examplePath)
		if err != nil {
			t.Fatal(err)
		}
		MustWrite(t, filepath.Join(dir, "qd.hcl"), string(src), 0o644)
		for _, name := range []string{"hello.sh", "progress.sh"} {
			MustWrite(t, filepath.Join(dir, "examples", name), "#!/bin/sh\nexit 0\n", 0o755)
		}
		c := MustLoad(t, filepath.Join(dir, "qd.hcl"))
		hello := c.Agent("hello")
		if hello == nil || c.Agent("progress") == nil || len(c.Agents) != 2 || len(c.Periodics) != 1 {
			t.Fatalf("got agents %+v and periodics %+v, want hello, progress and one periodic", c.Agents, c.Periodics)
		}
		if got, want := hello.Command[0], filepath.Join(dir, "examples", "hello.sh"); got != want {
			t.Errorf("hello command: got %s, want %s", got, want)
		}
		if hello.Lease != 5*time.Minute || hello.Heartbeat != 100*time.Second || c.Periodics[0].Agent != "hello" {
			t.Errorf("hello: got lease %s, heartbeat %s; periodic agent %q", hello.Lease, hello.Heartbeat, c.Periodics[0].Agent)
		}
	})
	t.Run("InPlace", func(t *testing.T) {
		// Ensure the example runs the real example agents of the
		// repository, so the quick start works from a checkout.
		MustLoad(t, examplePath)
	})
	t.Run("DocumentsEveryField", func(t *testing.T) {
		// Ensure every setting qd accepts is shown in the example, set or
		// commented out.
		src, err := os.ReadFile(examplePath)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*hcl.BodySchema{rootSchema, agentSchema, periodicSchema, uiSchema} {
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
