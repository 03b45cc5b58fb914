#!/bin/sh
# The README's quick start, as one script: from an empty database to a daemon
# running the hello agent. Run it from anywhere; it works in a fresh temporary
# directory (or $QD_QUICKSTART_DIR) and stops the daemon at the end.
#
#   QD=./qd scripts/quickstart.sh
#
# QD names the qd binary (default: qd on PATH). The database is the one qd
# would use anyway: QD_DATABASE_URL, else the local server like psql.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
qd=${QD:-qd}
work=${QD_QUICKSTART_DIR:-$(mktemp -d)}
cd "$work"
cp -R "$repo/examples" .

# 1. The database and its schema.
"$qd" migrate

# 2. A config with one agent, keeping the socket and the run logs here.
cat > qd.hcl <<'HCL'
socket    = "qd.sock"
state_dir = "state"

agent "hello" {
  command  = ["examples/hello.sh"]
  schedule = "@every 2s"
}
HCL
"$qd" run --check --config qd.hcl

# 3. The daemon, in the background.
"$qd" run --config qd.hcl 2>daemon.log &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT

# 4. Work, and a look at it.
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
