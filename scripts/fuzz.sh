#!/usr/bin/env bash
# Runs every Fuzz target for a bounded time each and ends with a table of executions
# per target: scripts/fuzz.sh 10s
# Each package's fuzzing test binary is built once (`go test -c -fuzz`) and run once per
# target, rather than rebuilt and relinked by `go test -fuzz` for every target (43 targets
# live in 15 packages). Packages run STRATA_FUZZ_JOBS at a time (default: the machine's
# cores), each target with one fuzzing worker, so one package's build overlaps another's
# fuzzing instead of leaving the cores idle: the same fuzzing time per target.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
jobs=${STRATA_FUZZ_JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache=$(go env GOCACHE)/fuzz

# pkg PKG DIR ID TARGET...: build PKG's fuzzing binary, then fuzz each TARGET for $t from
# DIR (the seed corpus and any failing input live in DIR/testdata/fuzz, as with go test);
# each target's row goes to $work/<ID>-<target>.row, a failure's output to .failed.
pkg() {
  local pkg=$1 dir=$2 id=$3 f out bin
  shift 3
  bin="$work/$id.test"
  if ! out=$(go test -c -fuzz=. -o "$bin" "$pkg" 2>&1); then
    echo "$out" >"$work/$id.failed"
    return 1
  fi
  for f in "$@"; do
    echo "fuzz $pkg $f for $t"
    # The flags go test would pass (-fuzzcachedir is where it keeps generated inputs).
    if ! out=$(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^$f\$" -test.fuzztime="$t" \
      -test.parallel=1 -test.fuzzcachedir="$cache/$pkg" 2>&1); then
      # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a failure
      # when a loaded machine slows a worker (golang/go#75804, fixed in Go 1.27): a bare
      # "context deadline exceeded" with no failing input written is that, not a finding.
      if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
        echo "  $f: the fuzz coordinator's deadline race (golang/go#75804), no failing input: not a finding"
      else
        printf 'package %s, target %s:\n%s\n' "$pkg" "$f" "$out" >>"$work/$id.failed"
        continue
      fi
    fi
    local execs
    execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2 || true)
    printf '%-45s %-28s %12s\n' "${pkg#github.com/strata-io/strata/}" "$f" "${execs:-?}" >"$work/$id-$f.row"
  done
  [ ! -e "$work/$id.failed" ]
}
export -f pkg
export t work cache

# One line per package with fuzz targets: PKG DIR ID TARGET... (largest first, so the
# long packages start early and the short ones fill in around them; no trailing blank,
# which xargs -L would take for a continued line).
n=0
for p in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$p")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //' | xargs || true)
  [ -n "$targets" ] || continue
  n=$((n + 1))
  printf '%d %s %s %03d %s\n' "$(wc -w <<<"$targets")" "$p" "$dir" "$n" "$targets"
done | sort -rn | cut -d' ' -f2- >"$work/packages"

# First, alone, the package that imports nearly everything (its fuzzing build compiles
# every dependency instrumented, apart from the tests' builds): the other packages' builds
# then find those in the cache, instead of two builds side by side compiling the same
# dependencies at once on a cold cache.
go test -c -fuzz=. -o "$work/warm.test" ./test/badinput

status=0
xargs -P "$jobs" -L 1 bash -c 'pkg "$@"' _ <"$work/packages" || status=$?
for failed in "$work"/*.failed; do
  [ -e "$failed" ] || continue
  echo "fuzz target failed:"
  cat "$failed"
  status=1
done
echo
printf '%-45s %-28s %12s\n' package target "execs in $t"
cat "$work"/*.row 2>/dev/null || true
echo "$(cat "$work"/*.row 2>/dev/null | wc -l) targets fuzzed"
exit "$status"
