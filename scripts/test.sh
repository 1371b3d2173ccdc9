#!/usr/bin/env bash
# The project's test command: starts Postgres and MinIO (scripts/services.sh), then runs
# every test against them, plus a bounded fuzzing pass over every decoder.
#   scripts/test.sh            all tests
#   scripts/test.sh ./segment  some packages
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
# Every build here uses the Dockerfile's build settings (a static, -trimpath build), so
# the packages compiled for the tests are the ones deploy's TestDockerImageServesByEnvironment
# links into the image's binary: on a cold cache that test would otherwise compile the
# whole module and its dependencies a second time (about 200 s of a CI run).
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
# phase NAME: the seconds since the previous phase ended, so a slow run shows where.
last=$SECONDS
phase() {
  echo "test.sh: $1 took $((SECONDS - last)) s"
  last=$SECONDS
}
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)
go vet "${pkgs[@]}"
phase "go vet"
# -p 1: packages that start servers and processes are timing-sensitive; run them one at
# a time rather than two at once on a 2-core machine.
if [ $# -gt 0 ]; then
  go test -count=1 -p 1 -timeout 30m "${pkgs[@]}"
  exit
fi
# Two lanes at once, each one package at a time: the packages whose tests start nodes,
# worker processes and Kafka clients against deadlines (the timing-sensitive ones, about
# two thirds of the time), beside everything else — mostly catalog and compactor tests
# that wait on Postgres, and unit tests. One lane alone left a core idle for most of
# the phase; more than one timing-sensitive package at a time starves their deadlines.
# The fault classes of the reliability harness and the bad-input suite run afterwards,
# on their own and verbose (see below).
timing='^github.com/strata-io/strata/(cmd/strata|cmd/strata/internal/.*|test/.*|kafka|connect|connect/pgcdc|ui|internal/stallconn)$'
mapfile -t lane_a < <(go list ./... | grep -E "$timing")
mapfile -t lane_b < <(go list ./... | grep -vE "$timing")
skip='^(TestTorture|TestTortureKafka|TestBadInput)$'
go test -count=1 -p 1 -timeout 30m -skip "$skip" "${lane_b[@]}" &
lane_b_pid=$!
status=0
go test -count=1 -p 1 -timeout 30m -skip "$skip" "${lane_a[@]}" || status=$?
wait "$lane_b_pid" || status=$?
[ "$status" -eq 0 ] || { echo "go test failed"; exit "$status"; }
phase "go test"
# The hostile-input suite, verbose: every case with the status and code it got.
go test -count=1 -timeout 10m -v -run '^TestBadInput$' ./test/badinput | grep -E '^\s*(--- |ok|FAIL|PASS)'
phase "the bad-input suite"

# The fault classes of the reliability harness, verbose, so that the output shows each
# class's table (operations ok/failed/unknown and every anomaly count). (The nodes' error
# logs, expected under faults, are left out.)
set +e
go test -count=1 -timeout 20m -v -run '^(TestTorture|TestTortureKafka)$' ./cmd/strata/internal/jepsen | grep -Ev '^\s+torture_test\.go:[0-9]+: time='
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { echo "TestTorture failed"; exit "$status"; }
phase "the fault classes"
# franz-go's own integration suite against dev and two serve nodes: a bounded subset
# (STRATA_KGO_SUITE=full for every test).
scripts/kgo-suite.sh
phase "franz-go's suite"
scripts/fuzz.sh "${STRATA_FUZZTIME:-3s}"
phase "fuzzing"
echo "test.sh: all passed in $SECONDS s"
