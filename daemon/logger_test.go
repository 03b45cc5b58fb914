package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/config"
)

func TestNewLogger_DurationsAsText(t *testing.T) {
	// Ensure the JSON log prints durations as text, as the text log does,
	// in loggers derived with Named and With too, and leaves other values
	// alone.
	var buf bytes.Buffer
	conf := config.Default()
	conf.LogFormat = "json"
	args := []any{"grace", 30 * time.Second, "runs", 2}
	newLogger(&buf, conf).Named("supervisor").With("lease", 5*time.Minute).Info("draining", args...)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	want := map[string]any{"grace": "30s", "lease": "5m0s", "runs": 2.0, "@module": "qd.supervisor"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %#v, want %#v in %s", k, got[k], v, strings.TrimSpace(buf.String()))
		}
	}
	if args[1] != 30*time.Second {
		t.Errorf("the caller's args were changed: %v", args)
	}

	buf.Reset()
	conf.LogFormat = "text"
	newLogger(&buf, conf).Warn("grace over", "grace", 1500*time.Millisecond)
	if !strings.Contains(buf.String(), "grace=1.5s") {
		t.Errorf("text log: got %q, want grace=1.5s", buf.String())
	}
}
