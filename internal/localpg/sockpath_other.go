//go:build !linux

package localpg

// maxSocketPath is the longest socket path macOS and the BSDs take:
// sun_path is 104 bytes, one of them for the terminating NUL.
const maxSocketPath = 103
