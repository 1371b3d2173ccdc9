#!/usr/bin/env bash
# Runs franz-go's own integration suite — pkg/kgo of the franz-go version pinned in
# go.mod, with KGO_SEEDS — against Strata, on two targets:
#   dev    one `strata dev` (SQLite and files)
#   serve  two `strata serve` nodes on Postgres and MinIO (scripts/services.sh), the
#          clients seeded with both
# and prints one line per test: its result on each target.
#
#   scripts/kgo-suite.sh                  the bounded subset CI runs (a few minutes)
#   STRATA_KGO_SUITE=full scripts/kgo-suite.sh   every test of pkg/kgo (about 11 minutes a target on 2 cores)
#   STRATA_KGO_SUITE=full STRATA_KGO_TARGETS=dev scripts/kgo-suite.sh
#   STRATA_KGO_RUN='^TestGroupETL$' scripts/kgo-suite.sh   one test (a -run pattern)
#
# The raw `go test -v` output of each target goes to $OUT (default ./kgo-suite-out).
# Exit status 1 when any test fails (EXPECTED_FAIL lists those allowed to: none).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${STRATA_KGO_SUITE:-ci}
targets=${STRATA_KGO_TARGETS:-dev serve}
out=${OUT:-$root/kgo-suite-out}
mkdir -p "$out"

# Tests allowed to fail, as a |-separated list of names: none.
EXPECTED_FAIL=""

# The bounded subset: broker-facing tests that finish in seconds — groups (classic and
# KIP-848, TestGroupETL's chained consumers included), regex consumption, produce and
# fetch corner cases, the transactional chain (TestTxnEtl: consume-transform-produce
# under read_committed, its KIP-848 cases included), share groups (KIP-932: the five
# share tests, TestShareGroupETL's chained share consumers with releases, rejects and
# killed members included), and the SASL logins (SCRAM as a user made through
# AlterUserScramCredentials, OAUTHBEARER with the nodes' --oauth-unsecured development
# mode).
CI_RUN='^(TestSCRAMAuth|TestSCRAMAuthBadCredentials|TestOAuthAuth|TestPing|TestGroupETL|TestTxnEtl|TestGroupSimple|TestIssue325|TestIssue337|TestDirectPartitionPurge|TestIssue434|TestPauseIssue489|TestIssue523|TestIssue648|TestIssue810|TestIssue865|TestClient_ProduceLargeMessages|TestUnknownGroupOffsetFetchPinned|TestConsumeRegex|Test848RegexBrokerResolves|TestShareGroup|TestShareGroupAckOnClose|TestShareGroupETL|TestShareGroupOffsetsAdmin|TestConsumeRegexShareSkipsInternal)$'
case "$mode" in
full) run=${STRATA_KGO_RUN:-.} ;;
ci) run=${STRATA_KGO_RUN:-$CI_RUN} ;;
*)
  echo "STRATA_KGO_SUITE=$mode: want full or ci" >&2
  exit 2
  ;;
esac

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${db:-}" ] && psql "$STRATA_TEST_POSTGRES" -qc "drop database if exists $db with (force)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() { # url
  for _ in $(seq 1 300); do
    curl -fs "$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "no answer from $1/readyz" >&2
  return 1
}

# The suite, from the module cache into a writable copy (go test writes nothing there,
# but the cache is read-only and some tests create files beside themselves).
version=$(go list -m -f '{{.Version}}' github.com/twmb/franz-go)
go mod download github.com/twmb/franz-go
src=$(go list -m -f '{{.Dir}}' github.com/twmb/franz-go)
cp -r "$src" "$work/franz-go"
chmod -R u+w "$work/franz-go"
echo "franz-go $version: building pkg/kgo's tests and strata" >&2
(cd "$work/franz-go/pkg/kgo" && go test -c -o "$work/kgo.test" .)
go build -o "$work/strata" ./cmd/strata
go build -o "$work/kgo-scram-user" ./scripts/kgo-scram-user

# The SASL tests (TestSCRAMAuth, TestSCRAMAuthBadCredentials, TestOAuthAuth) run against
# every target: its nodes require no authentication but serve SASL, a SCRAM user is made
# through Kafka's AlterUserScramCredentials (scram_user), and --oauth-unsecured accepts
# the tests' unsigned tokens (a development mode, refused with any authentication).
scram_user=kgo-scram
scram_password=kgo-scram-password-0123
scram_setup() { # seeds
  "$work/kgo-scram-user" -seeds "$1" -user "$scram_user" -password "$scram_password" -mechanism 256 >&2
}

kgo_test() { # seeds timeout args...
  local seeds=$1 timeout=$2
  shift 2
  (cd "$work/franz-go/pkg/kgo" &&
    KGO_SEEDS=$seeds KGO_TEST_RF=1 KGO_TEST_RECORDS=10000 KGO_LOG_LEVEL=none \
      KGO_TEST_SCRAM_SEEDS=$seeds KGO_TEST_SCRAM=$scram_user:$scram_password:256 KGO_TEST_OAUTH_SEEDS=$seeds \
      nice -n 10 "$work/kgo.test" -test.v -test.count 1 -test.timeout "$timeout" "$@")
}

run_suite() { # target seeds
  local target=$1 seeds=$2
  echo "running pkg/kgo ($mode: $run) against $target ($seeds)" >&2
  set +e
  kgo_test "$seeds" 90m -test.run "$run" >"$out/$target.txt" 2>&1
  set -e
}

for target in $targets; do
  case "$target" in
  dev)
    http=$(free_port) kafka=$(free_port)
    "$work/strata" dev --data "$work/dev" --listen "127.0.0.1:$http" --kafka-listen "127.0.0.1:$kafka" \
      --oauth-unsecured --log-level warn >"$out/dev-node.log" 2>&1 &
    pids+=($!)
    wait_ready "http://127.0.0.1:$http"
    scram_setup "127.0.0.1:$kafka"
    run_suite dev "127.0.0.1:$kafka"
    ;;
  serve)
    eval "$(scripts/services.sh)"
    db=strata_kgo_$(date +%s)
    psql "$STRATA_TEST_POSTGRES" -qc "create database $db" >/dev/null
    dsn=${STRATA_TEST_POSTGRES%/*}/$db?sslmode=disable
    bucket="s3://strata-kgo/$db?endpoint=$STRATA_TEST_S3_ENDPOINT&path_style=true&region=${STRATA_TEST_S3_REGION:-us-east-1}"
    seeds=
    for n in 1 2; do
      http=$(free_port) kafka=$(free_port)
      AWS_ACCESS_KEY_ID=$STRATA_TEST_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$STRATA_TEST_S3_SECRET_KEY \
        "$work/strata" serve --catalog "$dsn" --bucket "$bucket" --create-bucket --listen "127.0.0.1:$http" \
        --kafka-listen "127.0.0.1:$kafka" --kafka-auto-create-topics --oauth-unsecured --log-level warn >"$out/serve-node$n.log" 2>&1 &
      pids+=($!)
      wait_ready "http://127.0.0.1:$http"
      seeds=${seeds:+$seeds,}127.0.0.1:$kafka
    done
    scram_setup "$seeds"
    run_suite serve "$seeds"
    ;;
  *)
    echo "unknown target $target: want dev or serve" >&2
    exit 2
    ;;
  esac
done

# One line per top-level test: its result on each target.
status=0
results() { # target: every result line
  cat "$out/$1.txt"
}
tests=$(for t in $targets; do results "$t" | grep -oE '^--- (PASS|FAIL|SKIP): [A-Za-z0-9_]+' | awk '{print $3}'; done | sort -u)
printf '%-60s' "test"
for t in $targets; do printf ' %-6s' "$t"; done
echo
for name in $tests; do
  printf '%-60s' "$name"
  for t in $targets; do
    r=$(results "$t" | grep -oE "^--- (PASS|FAIL|SKIP): $name " | awk '{print $2}' | tr -d ':' | head -1)
    r=${r:--}
    printf ' %-6s' "$r"
    if [ "$r" = FAIL ] && { [ -z "$EXPECTED_FAIL" ] || ! grep -qw "$name" <<<"$EXPECTED_FAIL"; }; then status=1; fi
  done
  echo
done
for t in $targets; do
  if grep -qE '^(panic:|FAIL\s+.*\[build failed\])' "$out/$t.txt" || ! grep -qE '^(PASS|FAIL)$' "$out/$t.txt"; then
    echo "$t: the suite did not run to its end (see $out/$t.txt)" >&2
    status=1
  fi
done
exit $status
