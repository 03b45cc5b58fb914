#!/bin/sh
# A planner: splits the work into $PARTS parts (5 unless set), enqueues a
# worker for each, and a reducer that waits for all of them. Inside an
# agent, qd enqueue goes through the daemon's socket, so the planner needs
# no database URL; each task records the run that enqueued it.
set -eu
parts=${PARTS:-5}
after=""
i=1
while [ "$i" -le "$parts" ]; do
	id=$(qd enqueue --lane work --agent worker "{\"part\": $i}")
	after="$after --after $id"
	i=$((i + 1))
done
# shellcheck disable=SC2086 # one --after per worker
reducer=$(qd enqueue --lane reduce --agent reducer $after)
echo "planned $parts parts; reducer is task $reducer"
