#!/usr/bin/env bash
# The test command: vet and race-enabled tests over the whole module, against
# the PostgreSQL named by QD_TEST_DATABASE_URL (default: the local server).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -race -count=1 -timeout 30m ./... "$@"
