#!/bin/sh
# An agent that works for a while and shows progress. Every line it prints
# counts as progress for an agent's `stall_timeout`; a step that prints
# nothing can still prove progress with `qd heartbeat "$QD_RUN_ID"`, which
# reaches the daemon through the socket named in QD_SOCKET.
steps=${STEPS:-5}
i=1
while [ "$i" -le "$steps" ]; do
	echo "step $i of $steps"
	sleep 1
	if command -v qd >/dev/null 2>&1; then
		qd heartbeat "$QD_RUN_ID" >/dev/null || exit 1
	fi
	i=$((i + 1))
done
echo "finished $steps steps"
