#!/usr/bin/env bash
# Runs every Fuzz target for a bounded time each and ends with a table of executions
# per target: scripts/fuzz.sh 10s
# Targets run STRATA_FUZZ_JOBS at a time (default: the machine's cores), each with one
# fuzzing worker, so one target's build and link overlap another's fuzzing instead of
# leaving the cores idle: the same fuzzing time per target, less wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
jobs=${STRATA_FUZZ_JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# one PKG TARGET: fuzz one target; its output in $work/<n>.out, its row in $work/<n>.row.
one() {
  local pkg=$1 f=$2 id=$3 out
  echo "fuzz $pkg $f for $t"
  if ! out=$(go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" -parallel 1 "$pkg" 2>&1); then
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a failure
    # when a loaded machine slows a worker (golang/go#75804, fixed in Go 1.27): a bare
    # "context deadline exceeded" with no failing input written is that, not a finding.
    if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
      echo "  $f: the fuzz coordinator's deadline race (golang/go#75804), no failing input: not a finding"
    else
      echo "$out" >"$work/$id.failed"
      return 1
    fi
  fi
  local execs
  execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2 || true)
  printf '%-45s %-28s %12s\n' "${pkg#github.com/strata-io/strata/}" "$f" "${execs:-?}" >"$work/$id.row"
}
export -f one
export t work

n=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //'); do
    n=$((n + 1))
    printf '%s %s %03d\n' "$pkg" "$f" "$n"
  done
done >"$work/targets"

status=0
xargs -P "$jobs" -L 1 bash -c 'one "$@"' _ <"$work/targets" || status=$?
for failed in "$work"/*.failed; do
  [ -e "$failed" ] || continue
  echo "fuzz target failed:"
  cat "$failed"
  status=1
done
echo
printf '%-45s %-28s %12s\n' package target "execs in $t"
cat "$work"/*.row 2>/dev/null || true
exit "$status"
