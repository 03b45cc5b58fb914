package localpg

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// create makes the cluster with initdb in data.new, writes its
// authentication and settings, creates database qd, and only then renames
// data.new to data: a crash on the way leaves no cluster, and the next
// Start begins again.
func (c *Cluster) create(bin binaries) error {
	o, err := newOwner()
	if err != nil {
		return err
	}
	if err := c.prepare(o); err != nil {
		return err
	}
	tmp := filepath.Join(c.dir, "data.new")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	out, err := o.command(c.dir, bin.path("initdb"), "--pgdata", tmp, "--username", o.name,
		"--encoding", "UTF8", "--locale", "C", "--auth", "peer").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb the private PostgreSQL in %s as user %s: %v: %s", c.dir, o.name, err, lastLines(out, 5))
	}
	if err := c.configure(tmp, o); err != nil {
		return err
	}
	if err := createDatabase(bin, tmp, o, c.dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.dataDir()); err != nil {
		return err
	}
	return syncDir(c.dir)
}

// configure lets the owner alone in, over the socket only, and makes the
// settings of qd.conf (rewritten at each start) win over initdb's.
func (c *Cluster) configure(data string, o owner) error {
	hba := "# qd's private cluster: its owner only, over the unix socket, by peer\n" +
		"# authentication (root is mapped to the owner in pg_ident.conf). There is\n" +
		"# no TCP listener.\n" +
		"local all all peer map=qd\n"
	ident := "# MAPNAME SYSTEM-USERNAME PG-USERNAME\n" +
		"qd " + o.name + " " + o.name + "\n" +
		"qd root " + o.name + "\n"
	conf, err := os.ReadFile(filepath.Join(data, "postgresql.conf"))
	if err != nil {
		return err
	}
	conf = append(conf, "\n# Written by qd: qd.conf holds the settings of the private cluster.\ninclude 'qd.conf'\n"...)
	for name, text := range map[string]string{"pg_hba.conf": hba, "pg_ident.conf": ident, "postgresql.conf": string(conf)} {
		if err := writeOwned(filepath.Join(data, name), text, o); err != nil {
			return err
		}
	}
	return writeConf(data, c.socketDir(), o)
}

// writeConf writes qd.conf: no TCP, the socket in sockDir for the owner
// alone, fsync on.
func writeConf(data, sockDir string, o owner) error {
	text := "# Written by qd before each start of its private cluster; changes are lost.\n" +
		"listen_addresses = ''\n" +
		fmt.Sprintf("port = %d\n", port) +
		"unix_socket_directories = '" + strings.ReplaceAll(sockDir, "'", "''") + "'\n" +
		"unix_socket_permissions = 0700\n" +
		"fsync = on\n" + idleConf
	return writeOwned(filepath.Join(data, "qd.conf"), text, o)
}

// idleConf keeps an idle server asleep, for a laptop's battery: the
// background writer and the WAL writer wake at most every 10 s (commits
// still flush their own WAL), a checkpoint is due every 15 min at most,
// the autovacuum launcher looks every 5 min, and no logical replication
// launcher runs. docs/database.md says why each is safe.
const idleConf = "bgwriter_delay = 10s\n" +
	"wal_writer_delay = 10s\n" +
	"checkpoint_timeout = 15min\n" +
	"autovacuum_naptime = 5min\n" +
	"max_logical_replication_workers = 0\n"

// createDatabase creates database qd with the server in single-user mode,
// before any client could see the cluster.
func createDatabase(bin binaries, data string, o owner, dir string) error {
	cmd := o.command(dir, bin.path("postgres"), "--single", "-D", data, "template1")
	cmd.Stdin = strings.NewReader("CREATE DATABASE " + Database + "\n")
	out, err := cmd.CombinedOutput()
	if err == nil && bytes.Contains(out, []byte("ERROR:")) {
		err = fmt.Errorf("the server reported an error")
	}
	if err != nil {
		return fmt.Errorf("create database %s in the private PostgreSQL in %s: %v: %s", Database, dir, err, lastLines(out, 5))
	}
	return nil
}

// writeOwned writes a file of the owner's, mode 0600.
func writeOwned(path, text string, o owner) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	return o.chown(path)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// lastLines returns the last n lines of out, for an error message.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
