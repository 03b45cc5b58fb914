package supervisor

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	// tailSize bounds the output kept in memory for the run's output_tail.
	tailSize = 8 << 10
	// lineMax bounds the last stdout line kept for the summary.
	lineMax = 200
	// readBuf is the fixed read size for a child's pipes.
	readBuf = 32 << 10
	// MaxLogBytes caps a run's log file. Past it output is still read (the
	// child never blocks) and kept in the tail, but no longer written.
	MaxLogBytes = 64 << 20
)

// truncatedNote ends a log file that reached MaxLogBytes.
const truncatedNote = "\n[qd: log truncated at 64 MiB; later output is dropped, its last 8 KiB are in the run's output_tail]\n"

// output collects a child's stdout and stderr: the whole of it into the run
// log, the last tailSize bytes into a ring, and the last non-empty line of
// each stream (at most lineMax bytes) for the summary, and where the log
// switches between the two streams. Memory stays fixed whatever the child
// writes.
type output struct {
	mu     sync.Mutex
	log    io.Writer // the run log; nil until opened, and after a write error
	logErr error
	// open creates the run log at the first output; nil once called.
	open func() (io.Writer, error)
	// openStreams creates the run's stream record (see StreamsPath) at the
	// first switch between stdout and stderr; nil once called.
	openStreams func() (io.Writer, error)
	streams     io.Writer // nil until then, and after a write error
	stream      byte      // the stream of the last bytes logged: 'o' or 'e'
	ring        [tailSize]byte
	n           int64       // bytes written in all
	logged      int64       // bytes written to log
	lines       [2]lastLine // stdout, stderr
	// lastAt is when output last arrived, in ns on the supervisor's
	// monotonic clock (see Supervisor.mono); zero when none yet.
	lastAt atomic.Int64
	// lastWall is the same instant on the wall clock, for display.
	lastWall atomic.Int64
}

func newOutput(log io.Writer) *output {
	o := &output{log: log}
	for i := range o.lines {
		o.lines[i].cur = make([]byte, 0, lineMax)
	}
	return o
}

// readBufs holds the read buffers of children that have ended, so that a
// busy daemon does not allocate (and collect) two of them per child.
var readBufs = sync.Pool{New: func() any { return new([readBuf]byte) }}

// copyFrom reads r to its end with a fixed buffer.
func (o *output) copyFrom(r io.Reader, stdout bool, mono func() int64) {
	b := readBufs.Get().(*[readBuf]byte)
	defer readBufs.Put(b)
	buf := b[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			o.lastAt.Store(mono())
			o.lastWall.Store(time.Now().UnixNano())
			o.write(buf[:n], stdout)
		}
		if err != nil {
			return
		}
	}
}

func (o *output) write(p []byte, stdout bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open != nil {
		o.log, o.logErr = o.open()
		o.open = nil
	}
	if o.log != nil {
		o.noteStream(stdout)
		o.toLog(p)
	}
	o.toRing(p)
	if stdout {
		o.lines[0].add(p)
	} else {
		o.lines[1].add(p)
	}
}

// noteStream records, in the run's stream record, where in the log the
// output switches between stdout and stderr. A run that writes only to
// stdout has no record.
func (o *output) noteStream(stdout bool) {
	st := byte('o')
	if !stdout {
		st = 'e'
	}
	if st == o.stream || (o.stream == 0 && stdout) {
		o.stream = st
		return
	}
	if o.openStreams != nil {
		var err error
		if o.streams, err = o.openStreams(); err != nil {
			o.streams, o.logErr = nil, err
		}
		o.openStreams = nil
		if o.streams != nil && o.logged > 0 {
			fmt.Fprintf(o.streams, "0 o\n")
		}
	}
	if o.streams != nil {
		if _, err := fmt.Fprintf(o.streams, "%d %c\n", o.logged, st); err != nil {
			o.streams, o.logErr = nil, fmt.Errorf("write stream record: %w", err)
		}
	}
	o.stream = st
}

// toLog writes p to the log file until MaxLogBytes, then the note once.
func (o *output) toLog(p []byte) {
	room := MaxLogBytes - o.logged
	full := int64(len(p)) >= room
	if full {
		p = p[:max(room, 0)]
	}
	n, err := o.log.Write(p)
	o.logged += int64(n)
	if err == nil && full {
		_, err = io.WriteString(o.log, truncatedNote)
		o.log = nil
	}
	if err != nil {
		o.log, o.logErr = nil, err
	}
}

func (o *output) toRing(p []byte) {
	if len(p) > tailSize {
		o.n += int64(len(p) - tailSize)
		p = p[len(p)-tailSize:]
	}
	at := int(o.n % tailSize)
	c := copy(o.ring[at:], p)
	copy(o.ring[:], p[c:])
	o.n += int64(len(p))
}

// lastLine keeps the last non-empty line of one stream, at most lineMax
// bytes of it, in fixed memory.
type lastLine struct {
	cur     []byte
	curLong bool
	last    string
}

func (l *lastLine) add(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		room := lineMax - len(l.cur)
		if len(chunk) > room {
			l.cur = append(l.cur, chunk[:room]...)
			l.curLong = true
		} else {
			l.cur = append(l.cur, chunk...)
		}
		if i < 0 {
			return
		}
		l.endLine()
		p = p[i+1:]
	}
}

// endLine keeps the current line as the last one if it has any text.
func (l *lastLine) endLine() {
	if s := strings.TrimSpace(clean(l.cur)); s != "" {
		if l.curLong {
			s += "…"
		}
		l.last = s
	}
	l.cur, l.curLong = l.cur[:0], false
}

// line returns the last non-empty line, counting an unfinished one.
func (l *lastLine) line() string {
	if len(l.cur) > 0 {
		l.endLine()
	}
	return l.last
}

// tail returns the last tailSize bytes as valid text.
func (o *output) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n <= tailSize {
		return clean(o.ring[:o.n])
	}
	at := int(o.n % tailSize)
	b := append(append(make([]byte, 0, tailSize), o.ring[at:]...), o.ring[:at]...)
	// Drop a rune cut in half at the start.
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return clean(b)
}

// why is the line that best says why a run went wrong so far: the last
// non-empty line of stderr, else of stdout.
func (o *output) why() string {
	outLine, errLine := o.lastLines()
	if errLine != "" {
		return errLine
	}
	return outLine
}

// lastLines returns the last non-empty line of stdout and of stderr,
// counting unfinished ones.
func (o *output) lastLines() (stdout, stderr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines[0].line(), o.lines[1].line()
}

// clean makes b storable as text: valid UTF-8 and no NUL bytes.
func clean(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}
