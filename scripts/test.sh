#!/usr/bin/env bash
# The test command: vet and race-enabled tests over the whole module, against
# the PostgreSQL named by QD_TEST_DATABASE_URL (default: the local server).
# It fails at once, saying how to start one, when that database does not
# answer, unless QD_TEST_SKIP_DB=1 says to skip the tests that need it. The
# model checks' state counts, the fault-injection suite's figures and every
# skipped test with its reason are printed at the end, since go test hides
# a passing package's output.
set -euo pipefail
cd "$(dirname "$0")/.."
figures=$(mktemp)
model=$(mktemp)
report=$(mktemp -d)
trap 'rm -rf "$figures" "$model" "$report"' EXIT
go build -o "$report/testreport" ./scripts/testreport
"$report/testreport" -check-db
go vet ./...
status=0
QD_FAULTS_FIGURES="$figures" QD_MODEL_FIGURES="$model" go test -json -race -count=1 -timeout 30m ./... "$@" |
	"$report/testreport" || status=$?
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
exit "$status"
