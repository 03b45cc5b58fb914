package ui

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// Ensure the kernel's sock_diag names the user of a connection's other
// end, for IPv4 and IPv6 loopback, finds nothing for addresses no socket
// has, and does it quickly: a lookup by address, not a walk of every
// socket on the host.
func TestDiagUID(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		client := netip.MustParseAddrPort(c.LocalAddr().String())
		server := netip.MustParseAddrPort(c.RemoteAddr().String())
		start := time.Now()
		const n = 100
		for range n {
			uid, err := diagUID(client, server)
			if err != nil || uid != os.Geteuid() {
				t.Fatalf("%s: diagUID = %d, %v; want %d", network, uid, err, os.Geteuid())
			}
		}
		t.Logf("%s: %s a lookup", network, time.Since(start)/n)
		other := netip.AddrPortFrom(client.Addr(), client.Port()+1)
		if _, err := diagUID(other, server); !errors.Is(err, errNoPeer) {
			t.Errorf("%s: diagUID of a port no socket has: %v; want errNoPeer", network, err)
		}
	}
}
