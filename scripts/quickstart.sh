#!/bin/sh
# The README's first command: from a checkout to a daemon running the
# example agents, with nothing set up beforehand. It builds qd, works in a
# fresh directory, starts qd's private PostgreSQL there (made on first use;
# no server needs to run), starts the daemon with the example agents and a
# periodic task, enqueues a task, and shows qd status and the run's log. On
# a terminal it then follows the daemon's log, where the periodic task
# runs every 10 seconds, until Ctrl-C. At the end it stops the daemon and
# the private PostgreSQL, and keeps the directory.
#
#   scripts/quickstart.sh
#
# It needs Go (to build qd) and the PostgreSQL server binaries (initdb,
# pg_ctl); without them it says what to install. QD names a qd binary to
# use instead of building one; QD_QUICKSTART_DIR the directory to work in
# (default: a new temporary one).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${QD_QUICKSTART_DIR:-}" ]; then
	work=$QD_QUICKSTART_DIR
else
	work=$(mktemp -d)
	# As root the private cluster runs as the user qd, which must be able
	# to pass through this directory (not list it).
	chmod 711 "$work"
fi
echo "quickstart: working in $work"

# 1. qd itself.
if [ -n "${QD:-}" ]; then
	qd=$QD
else
	if ! command -v go >/dev/null 2>&1; then
		echo "quickstart: building qd needs Go 1.26 or later: install it from https://go.dev/dl/ (or your package manager), then run this again" >&2
		exit 1
	fi
	mkdir -p "$work/bin"
	(cd "$repo" && go build -o "$work/bin/qd" ./cmd/qd)
	qd=$work/bin/qd
fi
# Agents find qd on PATH (examples/progress.sh heartbeats with it).
PATH=$(cd "$(dirname "$qd")" && pwd):$PATH
export PATH
# The quick start uses the private cluster, whatever this shell names.
unset QD_DATABASE_URL QD_CONFIG

cd "$work"
cp -R "$repo/examples" .

# 2. A config with the example agents and a periodic task, and no
#    database: qd uses its private PostgreSQL in state_dir/pg. Relative
#    paths are relative to this file, so the socket, the run logs and the
#    cluster stay in this directory.
cat > qd.hcl <<'HCL'
socket    = "qd.sock"
state_dir = "state"

agent "hello" {
  command  = ["examples/hello.sh"]
  schedule = "@every 2s"
}

agent "flaky" {
  command       = ["examples/flaky.sh"]
  schedule      = "@every 2s"
  retry_backoff = "2s"
}

agent "progress" {
  command  = ["examples/progress.sh"]
  schedule = "@every 2s"
  env      = { STEPS = "3" }
}

# Something runs without typing: a hello task every 10 seconds.
periodic "greeting" {
  schedule = "@every 10s"
  agent    = "hello"
  lane     = "greetings"
  payload  = "{\"name\": \"periodic\"}"
}
HCL
"$qd" run --check --config qd.hcl

# 3. The private PostgreSQL: made (initdb, database qd, the schema) and
#    started on first use. Without the server binaries this says what to
#    install.
url=$("$qd" db start)
echo "quickstart: the private PostgreSQL answers at psql '$url' (qd db status says more)"

# 4. The daemon, in the background; stopped at the end with the cluster.
"$qd" run --config qd.hcl 2>daemon.log &
daemon=$!
stop() {
	kill -TERM "$daemon" 2>/dev/null || true
	wait "$daemon" 2>/dev/null || true
	"$qd" db stop
	echo "quickstart: stopped; $work keeps the config, the logs and the cluster (rm -rf it when done)"
}
trap stop EXIT
trap 'exit 130' INT TERM

i=0
until "$qd" status --config qd.hcl >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -gt 100 ]; then
		echo "quickstart: the daemon did not answer within 10s" >&2
		cat daemon.log >&2
		exit 1
	fi
	sleep 0.1
done

# 5. Work (qd enqueue wakes the daemon at once), and a look at it.
task=$("$qd" enqueue --agent hello --lane demo '{"name": "world"}')
echo "enqueued task $task"
i=0
until "$qd" show "$task" --json | grep -q '"state": "done"'; do
	i=$((i + 1))
	if [ "$i" -gt 100 ]; then
		echo "task $task not done after 20s" >&2
		cat daemon.log >&2
		exit 1
	fi
	sleep 0.2
done
"$qd" status --config qd.hcl
"$qd" tasks
"$qd" runs
run=$("$qd" runs --task "$task" --json | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -n 1)
"$qd" logs "$run"

# 6. On a terminal, watch the daemon work until Ctrl-C.
if [ -t 1 ]; then
	echo
	echo "quickstart: the daemon runs; in another terminal: cd $work && PATH=$(dirname "$qd"):\$PATH qd status"
	echo "quickstart: following its log (the periodic greeting runs every 10s); Ctrl-C stops it"
	tail -f daemon.log
fi
