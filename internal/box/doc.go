// Package box keeps a run's child in the box its agent's sandbox block
// asks for (docs/sandbox.md): the files it may read and write, the
// network it may reach, no capabilities and no_new_privs, for the child
// and everything it starts.
//
// Go runs no code of the caller's between fork and exec, so the box is
// made by a shim: the qd executable started again, as the run's own
// process, with Arg as its first argument (Prepare). The kernel gives it
// a mount namespace and, for a box without network, a network namespace,
// at clone time (Attr: as root, or in a user namespace of the child's
// own otherwise). The shim (Main) clones the host paths the box shows,
// builds a root of its own from them on a tmpfs and enters it
// (root_linux.go), brings up the loopback of a private network, gives up
// every capability, sets no_new_privs and restricts itself with Landlock
// (rules_linux.go), then execs the agent's program: same pid, same
// process group, same cgroup. What fails is written to the status pipe
// and the program is never started: a run is never less confined than
// its Spec says. Probe says what this host can do, by running the shim
// once on an empty box.
//
// It imports nothing of qd.
package box
