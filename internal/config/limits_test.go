package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512M": 512 << 20, "1.5G": 3 << 29, "64k": 64 << 10, "2T": 2 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "0", "-1", "1MB", "ten"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// Ensure CheckHost refuses each setting the host cannot apply at its own
// line, warns instead where the host says it might, checks the socket path
// at its line (or the default's, saying so), and that Load alone asks the
// host nothing.
func TestConfig_CheckHost(t *testing.T) {
	src := `socket = "/tmp/qd-check-host.sock"

agent "build" {
  command    = ["/bin/sh", "-c", "true"]
  schedule   = "@hourly"
  memory_max = "256M"
  cpu_max    = 1.5
}
`
	refuse := errors.New("no such controller here")
	var asked []string
	host := Host{
		SocketPath: func(path string) error { return fmt.Errorf("socket %s is too long", path) },
		Limit: func(a *Agent, setting string) (bool, error) {
			asked = append(asked, a.Name+" "+setting)
			return setting == "cpu_max", fmt.Errorf("agent %q: %s: %w", a.Name, setting, refuse)
		},
	}
	c, err := Parse([]byte(src), "qd.hcl")
	if err != nil {
		t.Fatalf("Parse asked the host: %v", err)
	}
	if a := c.Agents[0]; a.MemoryMax != 256<<20 || a.CPUMax != 1.5 {
		t.Errorf("limits read as %d bytes, %g CPUs", a.MemoryMax, a.CPUMax)
	}
	err = c.CheckHost(host)
	want := "qd.hcl:1: socket /tmp/qd-check-host.sock is too long\n" +
		`qd.hcl:6: agent "build": memory_max: no such controller here`
	if err == nil || err.Error() != want {
		t.Errorf("CheckHost:\n%v\nwant:\n%s", err, want)
	}
	if got := strings.Join(asked, ", "); got != "build memory_max, build cpu_max" {
		t.Errorf("asked the host of %q, want each limit once", got)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Line != 7 || !strings.Contains(c.Warnings[0].Message, "Delegate=yes") {
		t.Errorf("warnings %v, want cpu_max's at line 7 naming Delegate=yes", c.Warnings)
	}
	d, err := Parse([]byte("agent \"x\" {\n  command = [\"/bin/true\"]\n  schedule = \"@hourly\"\n}\n"), "qd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckHost(host); err == nil || !strings.HasPrefix(err.Error(), "qd.hcl:1: the default socket (set socket to a shorter path): socket ") {
		t.Errorf("default socket refused as %v", err)
	}
	if err := d.CheckHost(Host{}); err != nil {
		t.Errorf("an empty Host checked something: %v", err)
	}
}
