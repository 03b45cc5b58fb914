// Package status is the daemon's read-only control plane: an HTTP server
// that answers GET /v1/status with a JSON Snapshot on a unix socket, the
// client `qd status` uses to fetch it, the human rendering of a Snapshot,
// and the sd_notify(3) messages the daemon sends to systemd.
//
// # The socket
//
// Listen binds the socket so that it is never reachable by another user,
// not even for an instant: it binds inside a fresh 0700 directory, narrows
// the socket to 0600 there, and links it into place; the process umask is
// never changed, because it is process-wide and agents fork concurrently.
// Single instance: Listen holds an flock on PATH.lock for the server's
// lifetime, refuses a socket that answers (another daemon) and anything at
// the path that is not a socket, and replaces a socket that refuses
// connections (left by a daemon that died). Shutdown removes the socket
// only if the file at the path is still the one it bound.
//
// Any client can be slow or silent: connections are bounded by read,
// write and idle timeouts and by a header size limit, and each is served
// on its own goroutine, so a client that never sends a byte delays nobody.
// The SnapshotFunc must not wait on anything the heartbeat loop holds; see
// SnapshotFunc.
//
// The JSON is documented, with an example, in docs/status.md.
package status
