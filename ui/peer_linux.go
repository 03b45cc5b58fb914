package ui

import (
	"fmt"
	"net/netip"
	"os"
)

// peerCheck says whether this platform can tell who made a loopback
// connection.
const peerCheck = true

// socketUID finds the socket with local address client and remote
// address server in the kernel's TCP tables and returns its user: the
// client's socket, since the client is on this host.
func socketUID(client, server netip.AddrPort) (int, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue // no IPv6, say
		}
		uid, found, err := findUID(f, client, server)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", table, err)
		}
		if found {
			return uid, nil
		}
	}
	return 0, errNoPeer
}
