#!/bin/sh
# An agent that works for a while and proves progress on its own with
# `qd heartbeat`, besides the heartbeats the daemon sends for it. Useful with
# an agent `stall_timeout`: output or an explicit heartbeat shows it is alive.
steps=${STEPS:-5}
i=1
while [ "$i" -le "$steps" ]; do
	echo "step $i of $steps"
	sleep 1
	i=$((i + 1))
done
echo "finished $steps steps"
