package ui

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// Ensure findUID reads the uid of the socket whose local and remote
// addresses are the ones asked, in both tables' formats, and takes an
// IPv4-mapped IPv6 address for its IPv4 address.
func TestFindUID(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the tables below are a little-endian host's")
	}
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1E64 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1E64 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 0100007F:A000 0100007F:1E64 01 00000000:00000000 00:00000000 00000000 65534        0 3 1 0 20 4 30 10 -1
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:B000 00000000000000000000000001000000:1E64 01 00000000:00000000 00:00000000 00000000  1000        0 4 1 0 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:C000 0000000000000000FFFF00000100007F:1E64 01 00000000:00000000 00:00000000 00000000  1001        0 5 1 0 20 4 30 10 -1
`
	tests := []struct {
		table, local, remote string
		uid                  int
		found                bool
	}{
		{tcp, "127.0.0.1:40960", "127.0.0.1:7780", 65534, true},
		{tcp, "127.0.0.1:7780", "127.0.0.1:40960", 0, true}, // the server's own end
		{tcp, "127.0.0.1:40961", "127.0.0.1:7780", 0, false},
		{tcp, "[::ffff:127.0.0.1]:40960", "[::ffff:127.0.0.1]:7780", 65534, true},
		{tcp6, "[::1]:45056", "[::1]:7780", 1000, true},
		{tcp6, "127.0.0.1:49152", "127.0.0.1:7780", 1001, true},
		{tcp6, "[::1]:45056", "[::1]:7781", 0, false},
	}
	for _, tt := range tests {
		uid, found, err := findUID(strings.NewReader(tt.table), netip.MustParseAddrPort(tt.local), netip.MustParseAddrPort(tt.remote))
		if err != nil || found != tt.found || uid != tt.uid {
			t.Errorf("findUID(%s → %s) = %d, %v, %v; want %d, %v", tt.local, tt.remote, uid, found, err, tt.uid, tt.found)
		}
	}
}
