//go:build !linux

package supervisor

// hostCaps reads no limits on this platform.
func hostCaps(int) []Cap { return nil }
