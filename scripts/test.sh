#!/usr/bin/env bash
# The test command: vet and race-enabled tests over the whole module, against
# the PostgreSQL named by QD_TEST_DATABASE_URL (default: the local server).
# The model checks' state counts and the fault-injection suite's figures
# are printed at the end, since go test hides a passing package's output.
set -euo pipefail
cd "$(dirname "$0")/.."
figures=$(mktemp)
model=$(mktemp)
trap 'rm -f "$figures" "$model"' EXIT
go vet ./...
QD_FAULTS_FIGURES="$figures" QD_MODEL_FIGURES="$model" go test -race -count=1 -timeout 30m ./... "$@"
if [ -s "$model" ]; then
	echo
	echo "model checks (package model, docs/model.md):"
	cat "$model"
fi
if [ -s "$figures" ]; then
	echo
	echo "fault-injection figures (package faults):"
	cat "$figures"
fi
