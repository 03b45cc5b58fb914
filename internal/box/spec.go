package box

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Networks a box may have (Spec.Net).
const (
	NetHost  = "host"  // the host's network, as without a box
	NetNone  = "none"  // a network namespace of its own, with only its loopback
	NetPorts = "ports" // the host's network, TCP connections to Spec.Ports only
)

// SystemDirs are the directories every box may read and run programs
// from, those of them that exist: the system's programs, libraries and
// settings.
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// Hidden are files of the system directories that a box shows empty,
// whoever its child runs as: the password hashes.
var Hidden = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}

// Env is the variable that hands the shim its Spec; the shim removes it
// before the agent's program starts.
const Env = "QD_BOX"

// Arg is the first argument that makes the qd binary the shim:
// `qd __box PROGRAM ARGS...`, with the Spec in Env and the status pipe
// as descriptor 3 (see Main).
const Arg = "__box"

// MinLandlock is the Landlock ABI a box needs; PortsLandlock the one
// that restricts TCP ports (Linux 6.7).
const (
	MinLandlock   = 1
	PortsLandlock = 4
)

// Spec is the box of one run: what its child may read, write and reach.
// The supervisor makes it from the agent's sandbox block; every path is
// absolute and exists when the run starts. The box adds on its own the
// system directories, a private /tmp, a few devices, /proc, the program
// and the interpreter its #! line names, and the qd executable.
type Spec struct {
	// Read are directories and files the child may read and run programs
	// from; Write those it may also change.
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// Hide are files shown empty if the box would show them (the
	// daemon's config, which may name the database and its password).
	Hide []string `json:"hide,omitempty"`
	// Socket is the daemon's socket, reachable in the box at its path.
	Socket string `json:"socket,omitempty"`
	// Net is NetHost, NetNone or NetPorts; Ports are the TCP ports the
	// child may connect to with NetPorts.
	Net   string   `json:"net"`
	Ports []uint16 `json:"ports,omitempty"`
	// Dir is the child's working directory in the box.
	Dir string `json:"dir"`
	// Probe makes the shim build the box and exit 0 instead of starting
	// a program: the test of what the host can do (see Probe).
	Probe bool `json:"probe,omitempty"`
}

// Encode is s as the shim reads it from Env.
func (s Spec) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("box: encode spec: %v", err)) // plain strings and numbers
	}
	return string(b)
}

// Decode reads a Spec that Encode wrote.
func Decode(text string) (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return Spec{}, fmt.Errorf("decode box spec: %w", err)
	}
	return s, nil
}

// NetText is how status and the log name a box's network.
func NetText(net string, ports []uint16) string {
	if net != NetPorts {
		return net
	}
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(int(p))
	}
	return "TCP ports " + strings.Join(ps, ", ")
}

// Support is what this host can give a box.
type Support struct {
	OS string
	// Landlock is the kernel's Landlock ABI, 0 without Landlock.
	Landlock int
	// Namespaces says the daemon can make a box's mount and network
	// namespaces: as root, or in a user namespace of its own (UserNS).
	Namespaces, UserNS bool
	// Reason says why a box cannot be made, empty when it can.
	Reason string
}

// ErrUnsupported: this host cannot make the box a config asks for.
var ErrUnsupported = errors.New("this host cannot make the box")

// Check says whether s can make a box with network net, and if not,
// what is missing and what to do.
func (s Support) Check(net string) error {
	switch {
	case s.OS != "linux":
		return fmt.Errorf("%w: a sandbox needs Linux (Landlock and namespaces), and this is %s; remove the sandbox block (see docs/sandbox.md)", ErrUnsupported, s.OS)
	case s.Reason != "":
		return fmt.Errorf("%w: %s (see docs/sandbox.md)", ErrUnsupported, s.Reason)
	case net == NetPorts && s.Landlock < PortsLandlock:
		return fmt.Errorf("%w: network ports need Landlock ABI %d (Linux 6.7) to restrict TCP, and this kernel has ABI %d; use network = \"none\" or \"host\", or a newer kernel (see docs/sandbox.md)",
			ErrUnsupported, PortsLandlock, s.Landlock)
	}
	return nil
}

// For says what a box with network net is made of here, as status
// shows it.
func (s Support) For(net string) string {
	if s.Reason != "" || s.OS != "linux" {
		return "no box: " + s.Reason
	}
	ns := "a mount namespace"
	if net == NetNone {
		ns = "mount and network namespaces"
	}
	if s.UserNS {
		ns += " in a user namespace"
	}
	ll := fmt.Sprintf("Landlock ABI %d", s.Landlock)
	if net == NetPorts {
		ll += " with TCP rules"
	}
	return fmt.Sprintf("%s, %s, no_new_privs, no capabilities", ll, ns)
}
