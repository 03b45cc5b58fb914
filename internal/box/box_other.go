//go:build !linux

package box

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// Main is the shim, which needs Linux: elsewhere it says so and exits
// 125, starting nothing.
func Main(args []string) {
	fmt.Fprintf(os.NewFile(3, "status"), "a box needs Linux, and this is %s", runtime.GOOS)
	os.Exit(125)
}

// Attr does nothing: no box is made here.
func Attr(a *syscall.SysProcAttr, s Spec, daemonRoot bool, uid, gid int) {}

// Probe says that a box needs Linux.
func Probe(shim string) Support {
	return Support{OS: runtime.GOOS, Reason: "a sandbox needs Linux (Landlock and namespaces)"}
}
