#!/bin/sh
# An agent that fails its first attempt and succeeds on the next, to watch
# retries with backoff: `qd runs --task ID` shows both runs.
if [ "$QD_ATTEMPT" -lt 2 ]; then
	echo "attempt $QD_ATTEMPT: pretending to fail" >&2
	exit 1
fi
echo "attempt $QD_ATTEMPT: worked"
