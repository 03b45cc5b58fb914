#!/usr/bin/env bash
# The test command: vet and race-enabled tests over the whole module, against
# the PostgreSQL named by QD_TEST_DATABASE_URL (default: the local server).
# The fault-injection suite's figures (faults, runs, lost, duplicated, ...)
# are printed at the end, since go test hides a passing package's output.
set -euo pipefail
cd "$(dirname "$0")/.."
figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
go vet ./...
QD_FAULTS_FIGURES="$figures" go test -race -count=1 -timeout 30m ./... "$@"
if [ -s "$figures" ]; then
	echo
	echo "fault-injection figures (package faults):"
	cat "$figures"
fi
