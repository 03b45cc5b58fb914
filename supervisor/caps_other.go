//go:build !linux

package supervisor

// hostCaps reads no limits on this platform.
func hostCaps(int, int) []Cap { return nil }

func countOpenFiles() int { return 0 }
