//go:build unix && !linux

package supervisor

import "os"

// childPipe makes a pipe with one end for a child and one for the daemon,
// the daemon's end for reading when parentReads.
func childPipe(parentReads, _ bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if parentReads {
		return r, w, err
	}
	return w, r, err
}
