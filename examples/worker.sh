#!/bin/sh
# A worker: does one part (its payload says which) and stores what it
# found as its result, through the daemon's socket. The result is kept
# when the worker exits 0, and the reducer reads it.
set -eu
part=$(sed 's/[^0-9]//g')
sleep "0.$part" # the work
printf '{"part": %d, "square": %d}\n' "$part" $((part * part)) | qd result -
echo "part $part done"
