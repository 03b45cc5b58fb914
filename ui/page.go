package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/qd-run/qd/lease"
)

// page is one page of the dashboard: its path, the path of its JSON twin,
// its template and what it shows.
type page struct {
	path, api   string
	name, title string
	load        func(r *http.Request) (any, error)
}

// pageTemplate is a page's template set: "page" renders the whole page,
// "live" the part pushed again when it changes.
type pageTemplate struct{ t *template.Template }

var pageNames = []string{"overview", "tasks", "task", "timeline", "throughput", "actions", "confirm", "flash"}

func parsePages() (map[string]*pageTemplate, error) {
	out := map[string]*pageTemplate{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parse template %s: %w", name, err)
		}
		out[name] = &pageTemplate{t}
	}
	return out, nil
}

// view is what every template gets.
type view struct {
	Page, Title string
	ReadOnly    bool
	Data        any
	Error       string
	Path        string // the request's path and query, for links back
}

// loadTimeout bounds the queue's reads for one page or JSON answer.
const loadTimeout = 10 * time.Second

// serve answers a page's GET: JSON for the twin, a stream of its live
// part for an EventSource, else the page. The page is made while holding
// a load slot, and written after it is given back, so that a client slow
// to read holds no slot.
func (s *server) serve(p page, asJSON bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !asJSON && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			s.stream(w, r, p)
			return
		}
		var a answer
		ok := s.load(w, r, loadTimeout, func(r *http.Request) {
			if asJSON {
				data, err := p.load(r)
				if err != nil {
					a = jsonAnswer(status(err), map[string]string{"error": scrub(err)})
					return
				}
				a = jsonAnswer(http.StatusOK, data)
				return
			}
			v, err := s.view(r, p)
			code := http.StatusOK
			if err != nil {
				code = status(err)
			}
			a = s.html(code, p.name, "page", v)
		})
		if ok {
			a.write(w)
		}
	})
}

// load runs fn holding one of the Limits.Pages slots, with its context
// ended after timeout (none when zero); when no slot frees up within
// Limits.Wait it answers 503 instead and returns false.
func (s *server) load(w http.ResponseWriter, r *http.Request, timeout time.Duration, fn func(r *http.Request)) bool {
	if !s.loads.take(r.Context(), s.limits.Wait) {
		busy(w, "2", fmt.Sprintf("the dashboard is answering as many requests as it may at once (%d); try again in a moment", s.limits.Pages))
		return false
	}
	defer s.loads.give()
	if timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	fn(r)
	return true
}

func (s *server) view(r *http.Request, p page) (view, error) {
	data, err := p.load(r)
	v := view{Page: p.name, Title: p.title, ReadOnly: s.o.ReadOnly, Data: data, Path: r.URL.RequestURI()}
	if err != nil {
		v.Data, v.Error = nil, scrub(err)
	}
	return v, err
}

func status(err error) int {
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, lease.ErrInvalid), errors.Is(err, errBadQuery):
		return http.StatusBadRequest
	case errors.Is(err, lease.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// answer is a response made in full before it is written.
type answer struct {
	code        int
	contentType string
	body        []byte
}

func (a answer) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", a.contentType)
	w.WriteHeader(a.code)
	_, _ = w.Write(a.body)
}

// html renders template tmpl of page name with v, or an error page.
func (s *server) html(code int, name, tmpl string, v any) answer {
	var buf bytes.Buffer
	if err := s.pages[name].t.ExecuteTemplate(&buf, tmpl, v); err != nil {
		s.o.Logger.Error("render page", "page", name, "error", err)
		return answer{http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("render page: " + scrub(err) + "\n")}
	}
	return answer{code, "text/html; charset=utf-8", buf.Bytes()}
}

func (s *server) render(w http.ResponseWriter, code int, name, tmpl string, v any) {
	s.html(code, name, tmpl, v).write(w)
}

// jsonAnswer is v as indented JSON with code, or a 500 naming the error
// when v cannot be encoded: never a status without its body.
func jsonAnswer(code int, v any) answer {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "encode answer: " + scrub(err)})
	}
	return answer{code, "application/json", append(b, '\n')}
}

func writeJSON(w http.ResponseWriter, code int, v any) { jsonAnswer(code, v).write(w) }

// stream pushes the page's live part as a server-sent event at once and
// again each time it changes, until the client goes away. It holds one of
// the Limits.Streams slots throughout (503 when none is free) and a page
// slot for each look at the queue, lifts the request's read deadline (the
// client sends nothing more), and gives each write a deadline of its own.
func (s *server) stream(w http.ResponseWriter, r *http.Request, p page) {
	if !s.streams.take(r.Context(), 0) {
		busy(w, "10", fmt.Sprintf("the dashboard holds as many live streams as it may (%d): close a tab, or reload later", s.limits.Streams))
		return
	}
	defer s.streams.give()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	var last [32]byte
	lastSent := time.Now()
	tick := time.NewTicker(s.o.Refresh)
	defer tick.Stop()
	send := func(write func() bool) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.limits.Write))
		return write() && rc.Flush() == nil
	}
	for {
		var buf bytes.Buffer
		var rerr error
		looked := s.loads.take(r.Context(), s.o.Refresh)
		if looked {
			ctx, cancel := context.WithTimeout(r.Context(), loadTimeout)
			v, _ := s.view(r.WithContext(ctx), p)
			cancel()
			s.loads.give()
			rerr = s.pages[p.name].t.ExecuteTemplate(&buf, "live", v)
		}
		if rerr != nil {
			s.o.Logger.Error("render live part", "page", p.name, "error", rerr)
			return
		}
		sum := sha256.Sum256(buf.Bytes())
		switch {
		case looked && sum != last:
			last, lastSent = sum, time.Now()
			if !send(func() bool { return writeEvent(w, buf.Bytes()) }) {
				return
			}
		case time.Since(lastSent) > 15*time.Second:
			lastSent = time.Now()
			if !send(func() bool { _, err := fmt.Fprint(w, ": still here\n\n"); return err == nil }) {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// writeEvent writes the HTML data as one message event, a data: line per
// line. A carriage return ends a line of the stream as a newline does, so
// every control character but newline and tab goes out as an HTML
// character reference: whatever text the data holds, it is one event and
// the event's data alone, never a field of the sender's choosing.
func writeEvent(w http.ResponseWriter, data []byte) bool {
	var b bytes.Buffer
	b.WriteString("data: ")
	for _, c := range data {
		switch {
		case c == '\n':
			b.WriteString("\ndata: ")
		case c < 0x20 && c != '\t', c == 0x7f:
			fmt.Fprintf(&b, "&#%d;", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("\n\n")
	_, err := w.Write(b.Bytes())
	return err == nil
}

var errBadQuery = errors.New("bad query")

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadQuery, fmt.Sprintf(format, args...))
}
