#!/usr/bin/env bash
# The project's test command: starts Postgres and MinIO (scripts/services.sh), then runs
# every test against them, plus a bounded fuzzing pass over every decoder.
#   scripts/test.sh            all tests
#   scripts/test.sh ./segment  some packages
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)
go vet "${pkgs[@]}"
# -p 1: packages that start servers and processes are timing-sensitive; run them one at
# a time rather than two at once on a 2-core machine.
if [ $# -gt 0 ]; then
  go test -count=1 -p 1 -timeout 30m "${pkgs[@]}"
  exit
fi
# The fault classes of the reliability harness run on their own, verbose, so that the
# output shows each class's table (operations ok/failed/unknown and every anomaly count).
go test -count=1 -p 1 -timeout 30m -skip '^(TestTorture|TestTortureKafka|TestBadInput)$' ./...
# The hostile-input suite, verbose: every case with the status and code it got.
go test -count=1 -timeout 10m -v -run '^TestBadInput$' ./test/badinput | grep -E '^\s*(--- |ok|FAIL|PASS)'

# (The nodes' error logs, expected under faults, are left out.)
set +e
go test -count=1 -timeout 20m -v -run '^(TestTorture|TestTortureKafka)$' ./cmd/strata/internal/jepsen | grep -Ev '^\s+torture_test\.go:[0-9]+: time='
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { echo "TestTorture failed"; exit "$status"; }
# franz-go's own integration suite against dev and two serve nodes: a bounded subset
# (STRATA_KGO_SUITE=full for every test).
scripts/kgo-suite.sh
scripts/fuzz.sh "${STRATA_FUZZTIME:-3s}"
