// Package localpg keeps the private PostgreSQL cluster that qd uses when no
// database is configured: one directory, state_dir/pg, holding the cluster,
// its socket, its log and the lock that makes its first start happen once
// however many qd processes race for it.
//
// # Layout
//
//	pg/data           the cluster, made by initdb; its qd.conf is rewritten
//	                  before each start
//	pg/.s.PGSQL.5432  the unix socket; the server listens on no TCP port
//	pg/server.log     the server's log
//	pg/lock           flock(2)ed while a process creates, starts or stops it
//
// When pg/.s.PGSQL.5432 would be longer than the platform allows a socket
// path (107 bytes on Linux, 103 on macOS), the socket lives in
// /tmp/qd-pg-HASH instead, a directory named after the cluster's path.
// Clients never compute where the socket is: a running server says it in
// its postmaster.pid, which Start reads.
//
// # Start and stop
//
// Start returns the URL of database qd on a running server. When the server
// answers already, that costs a file read and a connect to the socket, and
// takes no lock. Otherwise, under the lock, it finds the binaries, runs
// initdb once (UTF8, C locale, peer authentication for the owner only,
// fsync on; database qd created before the directory takes its final name,
// so a crash leaves either no cluster or a whole one), clears a
// postmaster.pid left by a crash or a reboot, and starts the server with
// pg_ctl. The server outlives the process that started it: pg_ctl puts it
// in a session of its own. Only Stop, or a service manager that kills every
// process of its unit, ends it. Running gives the URL of a server that
// answers and starts nothing, for the commands that only read. Died
// tells a server that went away (killed, crashed, its socket removed) from
// one that was stopped, cheaply enough for a daemon to watch it: a server
// stopped cleanly removes its postmaster.pid, a killed one leaves it. The
// server is started without the variables through which a service manager
// speaks to qd ($NOTIFY_SOCKET and the like).
//
// # Root
//
// initdb and postgres refuse to run as root. When qd runs as root the
// cluster belongs to the system user qd (created with useradd when
// missing), else to nobody; initdb, pg_ctl and postgres run as that user,
// and qd connects over the socket as the role of that name, which
// pg_ident.conf maps root to.
//
// It imports no qd package and no database driver: it runs initdb, pg_ctl
// and postgres, and reads the files they write.
package localpg
