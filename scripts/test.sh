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
go test -count=1 -timeout 25m "${pkgs[@]}"
if [ $# -eq 0 ]; then
  scripts/fuzz.sh "${STRATA_FUZZTIME:-8s}"
fi
