package config

import (
	"strings"
	"testing"
)

func TestParse_UI(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		// Ensure a ui block is read with its defaults filled in.
		c, err := parse([]byte("ui {\n  read_only = true\n  allowed_hosts = [\"qd.lan\"]\n}\n"), "qd.hcl", false)
		if err != nil {
			t.Fatal(err)
		}
		if c.UI == nil || c.UI.Listen != DefaultUIListen || !c.UI.ReadOnly || len(c.UI.AllowedHosts) != 1 {
			t.Errorf("got %+v", c.UI)
		}
		if c, _ := parse([]byte("log_level = \"info\"\n"), "qd.hcl", false); c.UI != nil {
			t.Error("a file without a ui block has one")
		}
	})
	t.Run("BeyondLoopbackNeedsToken", func(t *testing.T) {
		// Ensure a listen address beyond loopback without a token is an
		// error at its line, and is accepted with one.
		_, err := parse([]byte("ui {\n  listen = \"0.0.0.0:7780\"\n}\n"), "qd.hcl", false)
		if err == nil || !strings.Contains(err.Error(), "qd.hcl:2:") || !strings.Contains(err.Error(), "set token") {
			t.Errorf("got %v, want an error at qd.hcl:2 asking for a token", err)
		}
		if _, err := parse([]byte("ui {\n  listen = \"0.0.0.0:7780\"\n  token = \"x\"\n}\n"), "qd.hcl", false); err != nil {
			t.Errorf("with a token: %v", err)
		}
	})
	t.Run("Twice", func(t *testing.T) {
		// Ensure a second ui block is an error naming both lines.
		_, err := parse([]byte("ui {}\nui {}\n"), "qd.hcl", false)
		if err == nil || !strings.Contains(err.Error(), "lines 1 and 2") {
			t.Errorf("got %v", err)
		}
	})
}
