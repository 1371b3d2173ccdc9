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
go test -count=1 -p 1 -timeout 30m "${pkgs[@]}"
if [ $# -eq 0 ]; then
  scripts/fuzz.sh "${STRATA_FUZZTIME:-5s}"
fi
