package lease_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
)

// Ensure an enqueue is refused, with the limit named, for a payload that
// nests deeper than MaxPayloadDepth, and accepted at the limit; brackets
// inside strings do not count.
func TestValidateEnqueue_Depth(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		payload string
		ok      bool
	}{
		{nested(lease.MaxPayloadDepth), true},
		{nested(lease.MaxPayloadDepth + 1), false},
		{nested(10000), false},
		{nested(20000), false},
		{`{"a":"` + strings.Repeat("[{", 5000) + `\"]"}`, true},
	}
	for _, tt := range tests {
		p := lease.EnqueueParams{Agent: "w", Payload: json.RawMessage(tt.payload)}
		err := lease.ValidateEnqueue(&p)
		if tt.ok != (err == nil) {
			t.Errorf("payload of %d bytes: err %v, want ok %v", len(tt.payload), err, tt.ok)
		}
		if err != nil && (!errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "limit of 64")) {
			t.Errorf("refusal does not name the limit as ErrInvalid: %v", err)
		}
	}
}

// Ensure ShowPayload passes a payload within the limits through, and
// gives one stored deeper than the limit (or not JSON) as a JSON string
// with a note, so that it can be embedded in a listing.
func TestShowPayload(t *testing.T) {
	ok := json.RawMessage(`{"a":[1,2]}`)
	if got, note := lease.ShowPayload(ok); string(got) != string(ok) || note != "" {
		t.Errorf("ShowPayload(%s) = %s, %q", ok, got, note)
	}
	for _, stored := range []string{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), `{"a":`} {
		got, note := lease.ShowPayload(json.RawMessage(stored))
		var s string
		if err := json.Unmarshal(got, &s); err != nil || s != stored || note == "" {
			t.Errorf("ShowPayload of %d bytes: %.40s (%v), note %q; want the text as a string and a note", len(stored), got, err, note)
		}
		if _, err := json.Marshal([]any{map[string]json.RawMessage{"payload": got}}); err != nil {
			t.Errorf("shown payload cannot be embedded: %v", err)
		}
	}
}
