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

// serve answers a page's GET: JSON for the twin, a stream of its live
// part for an EventSource, else the page.
func (s *server) serve(p page, asJSON bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asJSON {
			data, err := p.load(r)
			if err != nil {
				writeJSON(w, status(err), map[string]string{"error": scrub(err)})
				return
			}
			writeJSON(w, http.StatusOK, data)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			s.stream(w, r, p)
			return
		}
		v, err := s.view(r, p)
		code := http.StatusOK
		if err != nil {
			code = status(err)
		}
		s.render(w, code, p.name, "page", v)
	})
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

func (s *server) render(w http.ResponseWriter, code int, name, tmpl string, v any) {
	var buf bytes.Buffer
	if err := s.pages[name].t.ExecuteTemplate(&buf, tmpl, v); err != nil {
		s.o.Logger.Error("render page", "page", name, "error", err)
		http.Error(w, "render page: "+scrub(err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeJSON answers v as indented JSON with code, or a 500 naming the
// error when v cannot be encoded: never a status without its body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "encode answer: " + scrub(err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// stream pushes the page's live part as a server-sent event at once and
// again each time it changes, until the client goes away.
func (s *server) stream(w http.ResponseWriter, r *http.Request, p page) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	var last [32]byte
	lastSent := time.Now()
	tick := time.NewTicker(s.o.Refresh)
	defer tick.Stop()
	for {
		var buf bytes.Buffer
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		v, _ := s.view(r.WithContext(ctx), p)
		cancel()
		if err := s.pages[p.name].t.ExecuteTemplate(&buf, "live", v); err != nil {
			s.o.Logger.Error("render live part", "page", p.name, "error", err)
			return
		}
		sum := sha256.Sum256(buf.Bytes())
		switch {
		case sum != last:
			last, lastSent = sum, time.Now()
			if !writeEvent(w, buf.Bytes()) {
				return
			}
			flusher.Flush()
		case time.Since(lastSent) > 15*time.Second:
			lastSent = time.Now()
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil {
				return
			}
			flusher.Flush()
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
