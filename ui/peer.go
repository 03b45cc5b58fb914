package ui

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
)

// Who is at the other end of a loopback connection. The client's socket
// is on this host, so the kernel's table of TCP sockets (/proc/net/tcp
// and tcp6 on Linux) lists it, with the user who made it: the entry whose
// local address is the client's and whose remote address is ours.

// errNoPeer: the user of the connection's other end is not known.
var errNoPeer = errors.New("no socket of this host is the other end of the connection")

// peer is the other end of one connection, looked up once, when first
// asked.
type peer struct {
	client, server netip.AddrPort
	once           sync.Once
	uid            int
	err            error
}

type peerKey struct{}

// connContext gives each connection its peer, to be looked up when a
// request without a token needs it.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerKey{}, newPeer(c.RemoteAddr().String(), c.LocalAddr().String()))
}

func newPeer(client, server string) *peer {
	p := &peer{}
	p.client, p.err = netip.ParseAddrPort(client)
	if p.err == nil {
		p.server, p.err = netip.ParseAddrPort(server)
	}
	return p
}

// peerOf returns the request's peer: its connection's, or one made from
// the request's addresses when it came through another server.
func peerOf(r *http.Request) *peer {
	if p, ok := r.Context().Value(peerKey{}).(*peer); ok {
		return p
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return &peer{err: errNoPeer}
	}
	return newPeer(r.RemoteAddr, local.String())
}

// UID returns the user id of the process that made the connection's
// other end.
func (p *peer) UID() (int, error) {
	p.once.Do(func() {
		if p.err == nil {
			p.uid, p.err = socketUID(p.client, p.server)
		}
	})
	return p.uid, p.err
}

// findUID reads a table in the format of /proc/net/tcp and returns the
// uid of the socket whose local address is local and remote address is
// remote, comparing IPv4 and IPv4-mapped IPv6 addresses as equal.
func findUID(table io.Reader, local, remote netip.AddrPort) (int, bool, error) {
	sc := bufio.NewScanner(table)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		l, lerr := parseSocketAddr(f[1])
		r, rerr := parseSocketAddr(f[2])
		if lerr != nil || rerr != nil || !sameAddr(l, local) || !sameAddr(r, remote) {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		return uid, err == nil, err
	}
	return 0, false, sc.Err()
}

func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseSocketAddr reads an address of /proc/net/tcp or tcp6: the
// address's 32-bit words in hex, each as the host's byte order holds it,
// a colon, and the port in hex.
func parseSocketAddr(s string) (netip.AddrPort, error) {
	addr, port, ok := strings.Cut(s, ":")
	if !ok || (len(addr) != 8 && len(addr) != 32) {
		return netip.AddrPort{}, errors.New("bad socket address " + s)
	}
	raw, err := hex.DecodeString(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	n, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip, uint16(n)), nil
}
