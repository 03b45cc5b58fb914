// Package ui is the web dashboard: the pages `qd ui` serves, and a daemon
// with a ui block in its config serves too. Pages are rendered on the
// server with html/template from files embedded in the binary; each one
// has a JSON twin under /api/, and the live part of a page is pushed again
// with Server-Sent Events whenever it changes, so nothing reloads.
//
// The dashboard reads the queue through Store, which package pg
// implements, and asks the daemons it can reach on this host (their unix
// sockets, found in the queue's daemons table) for what only a daemon
// knows: schedules, next ticks, the silence of a run as it counts it.
//
// # Security
//
// A dashboard that is not on a loopback address needs a token (New refuses
// it otherwise). Without one, loopback is still no boundary on a shared
// host, so a request is served only when the kernel says its connection
// was made by the dashboard's own user or root (peer.go, peer_linux.go),
// or when it carries the local token of the state directory's ui-token
// file (access.go); anyone else gets /static/ and a 403. Every request's
// Host header must name the listen address, an IP address, localhost or
// one of the allowed hosts, which defeats DNS rebinding. Nothing a GET
// does changes state; every change is a POST through net/http's
// CrossOriginProtection. ReadOnly hides and refuses the actions. Payloads
// and output are always escaped, their control characters shown as
// visible escapes, and no page, JSON or error shows the database URL: the
// dashboard never holds it, and error texts pass through scrub.
//
// # Limits
//
// Dashboard.Serve holds at most Limits.Conns connections, with read,
// write and idle timeouts; at most Limits.Pages requests read the queue at
// once and Limits.Streams live streams are open, past which a request is
// answered 503 (serve.go).
//
// Package ui imports lease and api, and no backend.
package ui
