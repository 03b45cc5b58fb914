package ui

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// peerCheck says whether this platform can tell who made a loopback
// connection.
const peerCheck = true

// socketUID finds the socket with local address client and remote
// address server, the client's own since the client is on this host, and
// returns its user. It asks the kernel for that one socket over
// NETLINK_SOCK_DIAG (what ss reads), a lookup by address; where netlink
// is refused it reads /proc/net/tcp and tcp6, whose every read walks all
// of the host's sockets (milliseconds of the kernel's time), one at a
// time.
func socketUID(client, server netip.AddrPort) (int, error) {
	uid, err := diagUID(client, server)
	if errors.Is(err, errNoPeer) || err == nil {
		return uid, err
	}
	procMu.Lock()
	defer procMu.Unlock()
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

var procMu sync.Mutex

// The layout of a sock_diag request for one TCP socket (struct
// inet_diag_req_v2 after a netlink header) and of the answer's uid
// (struct inet_diag_msg), from linux/inet_diag.h.
const (
	nlHeader    = 16
	diagReqSize = 56
	diagUIDAt   = nlHeader + 64
	noCookie    = ^uint32(0)
)

// diagUID asks the kernel for the TCP socket whose local address is local
// and remote address remote, and returns its uid; errNoPeer when there is
// none.
func diagUID(local, remote netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Sendto(fd, diagRequest(local.Addr().Unmap(), local.Port(), remote.Addr().Unmap(), remote.Port()), 0,
		&unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("netlink receive: %w", err)
	}
	return diagAnswer(buf[:n])
}

// diagRequest is a netlink message asking for one TCP socket by its
// addresses, which must both be IPv4 or both IPv6.
func diagRequest(src netip.Addr, sport uint16, dst netip.Addr, dport uint16) []byte {
	b := make([]byte, nlHeader+diagReqSize)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	req := b[nlHeader:]
	req[0] = unix.AF_INET6
	if src.Is4() {
		req[0] = unix.AF_INET
	}
	req[1] = unix.IPPROTO_TCP
	ne.PutUint32(req[4:], ^uint32(0)) // any state
	id := req[8:]
	binary.BigEndian.PutUint16(id[0:], sport)
	binary.BigEndian.PutUint16(id[2:], dport)
	s, d := src.AsSlice(), dst.AsSlice()
	copy(id[4:20], s)
	copy(id[20:36], d)
	ne.PutUint32(id[40:], noCookie)
	ne.PutUint32(id[44:], noCookie)
	return b
}

// diagAnswer reads the uid from the kernel's answer to diagRequest.
func diagAnswer(b []byte) (int, error) {
	if len(b) < nlHeader+4 {
		return 0, errors.New("netlink: short answer")
	}
	ne := binary.NativeEndian
	switch ne.Uint16(b[4:]) {
	case unix.NLMSG_ERROR:
		errno := unix.Errno(-int32(ne.Uint32(b[nlHeader:])))
		if errno == unix.ENOENT {
			return 0, errNoPeer
		}
		return 0, fmt.Errorf("netlink: %w", errno)
	case unix.SOCK_DIAG_BY_FAMILY:
		if len(b) < diagUIDAt+4 {
			return 0, errors.New("netlink: short answer")
		}
		return int(ne.Uint32(b[diagUIDAt:])), nil
	}
	return 0, fmt.Errorf("netlink: answer of type %d", ne.Uint16(b[4:]))
}
