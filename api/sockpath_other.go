//go:build !linux

package api

// sunPathSize is the size of sockaddr_un.sun_path on macOS and the BSDs,
// terminating NUL included.
const sunPathSize = 104
