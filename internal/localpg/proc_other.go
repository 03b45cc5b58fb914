//go:build !linux && !darwin

package localpg

import "time"

// bootTime is unknown on this platform.
func bootTime() time.Time { return time.Time{} }

func zombie(int) bool { return false }

func postmasterOf(int, string) bool { return true }

func dirInUse(string) bool { return false }
