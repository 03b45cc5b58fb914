package faults

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards TCP connections to the database and can cut them: refuse
// (connections closed, new ones closed at once), blackhole (bytes dropped,
// connections held open: the network went silent), or lose the reply of
// one COMMIT (the server committed, the client never hears).
type proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	mode      int
	conns     map[*pconn]struct{}
	marker    []byte // arm: cut the first COMMIT reply after this is seen
	commitCut chan struct{}
}

const (
	modeForward = iota
	modeRefuse
	modeBlackhole
)

type pconn struct {
	client, server net.Conn
	sawMarker      bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[*pconn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case modeRefuse:
			c.Close()
			continue
		case modeBlackhole:
			pc := &pconn{client: c}
			p.track(pc)
			go func() { _, _ = io.Copy(io.Discard, c) }()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		pc := &pconn{client: c, server: s}
		p.track(pc)
		go p.pipe(pc, c, s, false)
		go p.pipe(pc, s, c, true)
	}
}

func (p *proxy) track(pc *pconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[pc] = struct{}{}
}

// pipe copies src to dst; reply is true for the server-to-client side.
func (p *proxy) pipe(pc *pconn, src, dst net.Conn, reply bool) {
	defer p.drop(pc)
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			mode := p.mode
			cut := reply && p.cutReply(pc, chunk)
			p.mu.Unlock()
			if cut {
				// The server has committed; the client never learns it.
				pc.client.Close()
				time.AfterFunc(time.Second, func() { pc.server.Close() })
				return
			}
			if mode == modeBlackhole {
				continue
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cutReply says whether chunk is the COMMIT reply to lose. Called with mu.
func (p *proxy) cutReply(pc *pconn, chunk []byte) bool {
	if p.marker == nil {
		return false
	}
	if bytes.Contains(chunk, p.marker) {
		pc.sawMarker = true
	}
	if !pc.sawMarker || !bytes.Contains(chunk, []byte("COMMIT\x00")) {
		return false
	}
	p.marker = nil
	close(p.commitCut)
	return true
}

func (p *proxy) drop(pc *pconn) {
	pc.client.Close()
	if pc.server != nil {
		pc.server.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, pc)
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	cs := make([]*pconn, 0, len(p.conns))
	for pc := range p.conns {
		cs = append(cs, pc)
	}
	p.mu.Unlock()
	for _, pc := range cs {
		p.drop(pc)
	}
}

func (p *proxy) setMode(m int) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
}

// Refuse drops every connection and refuses new ones, like a server that
// went down.
func (p *proxy) Refuse() {
	p.setMode(modeRefuse)
	p.closeAll()
}

// Blackhole silences every connection, old and new, without closing any.
func (p *proxy) Blackhole() { p.setMode(modeBlackhole) }

// Restore forwards again; connections that were silenced are closed, as
// they would be once the network came back and the server had given up.
func (p *proxy) Restore() {
	p.mu.Lock()
	was := p.mode
	p.mode = modeForward
	p.mu.Unlock()
	if was == modeBlackhole {
		p.closeAll()
	}
}

// LoseCommitAfter arms the proxy: the first COMMIT reply on a connection
// whose replies carried marker is not delivered, and the connection is cut.
// The returned channel closes when that happened.
func (p *proxy) LoseCommitAfter(marker string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = []byte(marker)
	p.commitCut = make(chan struct{})
	return p.commitCut
}
