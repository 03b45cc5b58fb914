package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// childPipe makes a pipe with one end for a child and one for the daemon,
// the daemon's end for reading when parentReads. The child's end stays
// blocking and never enters the runtime's poller: it is closed as soon as
// the child holds a copy. The daemon's end enters the poller (non-blocking)
// only when poll is set. os.Pipe would put both ends in the poller and the
// child's back out, five system calls more per end.
func childPipe(parentReads, poll bool) (parent, child *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	pe, ce := p[1], p[0]
	if parentReads {
		pe, ce = p[0], p[1]
	}
	if poll {
		// A new pipe end has no other status flag to keep.
		if _, err := unix.FcntlInt(uintptr(pe), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, os.NewSyscallError("fcntl", err)
		}
	}
	return os.NewFile(uintptr(pe), "|daemon"), os.NewFile(uintptr(ce), "|child"), nil
}
