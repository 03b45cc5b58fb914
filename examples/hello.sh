#!/bin/sh
# A minimal qd agent. qd writes the task's payload to stdin and describes the
# task in QD_* variables. Exit 0 marks the task done; any other status fails
# this attempt and qd retries it with backoff. The last line printed on stdout
# becomes the run's summary.
payload=$(cat)
echo "task $QD_TASK_ID, attempt $QD_ATTEMPT of $QD_MAX_ATTEMPTS, lane $QD_LANE"
echo "payload: $payload"
echo "said hello"
