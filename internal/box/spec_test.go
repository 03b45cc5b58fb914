package box_test

import (
	"testing"

	"github.com/qd-run/qd/internal/box"
)

// Ensure status says what each box is made of: its network namespace only
// with no network, Landlock's TCP rules only with ports, the user
// namespace of a daemon that is not root, and why there is no box.
func TestSupport_For(t *testing.T) {
	root := box.Support{OS: "linux", Landlock: 7, Namespaces: true}
	user := root
	user.UserNS = true
	for _, c := range []struct {
		s    box.Support
		net  string
		want string
	}{
		{root, box.NetHost, "Landlock ABI 7, a mount namespace, no_new_privs, no capabilities"},
		{root, box.NetNone, "Landlock ABI 7, mount and network namespaces, no_new_privs, no capabilities"},
		{root, box.NetPorts, "Landlock ABI 7 with TCP rules, a mount namespace, no_new_privs, no capabilities"},
		{user, box.NetNone, "Landlock ABI 7, mount and network namespaces in a user namespace, no_new_privs, no capabilities"},
		{box.Support{OS: "darwin", Reason: "a sandbox needs Linux"}, box.NetHost, "no box: a sandbox needs Linux"},
	} {
		if got := c.s.For(c.net); got != c.want {
			t.Errorf("%+v For(%s) = %q, want %q", c.s, c.net, got, c.want)
		}
	}
}
