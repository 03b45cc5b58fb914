package ui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/ui"
)

// sseEvent is an event as a browser's EventSource dispatches it.
type sseEvent struct{ Type, Data, LastID string }

// readEvents parses a text/event-stream as the HTML standard's
// EventSource does (lines end at CRLF, LF or a lone CR; event, data and
// id fields) and returns the first n events it dispatches.
func readEvents(r io.Reader, n int) ([]sseEvent, error) {
	br := bufio.NewReader(r)
	var out []sseEvent
	var typ, lastID string
	var data strings.Builder
	var line []byte
	for len(out) < n {
		c, err := br.ReadByte()
		if err != nil {
			return out, err
		}
		if c != '\r' && c != '\n' {
			line = append(line, c)
			continue
		}
		if c == '\r' {
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
		}
		field, value, _ := strings.Cut(string(line), ":")
		value = strings.TrimPrefix(value, " ")
		line = line[:0]
		switch {
		case field == "" && value == "": // an empty line dispatches
			if data.Len() > 0 {
				if typ == "" {
					typ = "message"
				}
				out = append(out, sseEvent{Type: typ, Data: strings.TrimSuffix(data.String(), "\n"), LastID: lastID})
			}
			typ = ""
			data.Reset()
		case field == "": // a comment
		case field == "event":
			typ = value
		case field == "data":
			data.WriteString(value + "\n")
		case field == "id" && !strings.Contains(value, "\x00"):
			lastID = value
		}
	}
	return out, nil
}

// Ensure an agent's carriage returns and escape sequences, in its summary
// and its output, cannot split the task page's event stream: an
// EventSource reading it sees one message event, no id, and the agent's
// text in it with the control characters as visible escapes.
func TestUI_StreamEscapesAgentText(t *testing.T) {
	p, _ := MustProvider(t)
	id := MustEnqueueJSON(t, p, "cr", `{}`)
	attack := "fine\revent: evil\rid: 666\rretry: 1\rdata: injected\r\r\x1b[31mred\x1b[0m"
	MustFinish(t, p, "cr", lease.RunFailed, "summary "+attack, "output "+attack+"\n")
	base := MustServer(t, p, ui.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/tasks/%d", base, id), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events, err := readEvents(resp.Body, 1)
	if err != nil || len(events) != 1 {
		t.Fatalf("stream: %d events, %v", len(events), err)
	}
	ev := events[0]
	if ev.Type != "message" || ev.LastID != "" {
		t.Errorf("the agent's text chose the event: type %q, id %q; want message and no id", ev.Type, ev.LastID)
	}
	for _, want := range []string{`summary fine\revent: evil\rid: 666\rretry: 1\rdata: injected\r\r\x1b[31mred\x1b[0m`,
		`output fine\revent: evil\rid: 666`} {
		if !strings.Contains(ev.Data, want) {
			t.Errorf("the event lacks the agent's text with visible escapes %q:\n%.2000s", want, ev.Data)
		}
	}
	if strings.ContainsAny(ev.Data, "\r\x1b") {
		t.Errorf("the event carries raw control characters")
	}
}
