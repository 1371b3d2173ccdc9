#!/usr/bin/env bash
# Runs `strata bench` (package cmd/strata/internal/bench) in one command:
#   scripts/bench.sh                embedded node (SQLite + files), nothing else needed
#   scripts/bench.sh postgres       one node on Postgres + MinIO (started by services.sh)
#   scripts/bench.sh postgres --nodes 2 --duration 20s   extra flags go to strata bench
# The table goes to stdout; report.json, latency.svg and the nodes' logs to a directory of
# the run's own under ~/.cache/strata/bench (said on stderr; --out DIR to choose).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=embedded
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then # a first argument that is not a flag
  mode=$1
  shift
fi
case "$mode" in
embedded)
  exec go run ./cmd/strata bench "$@"
  ;;
postgres)
  eval "$(scripts/services.sh)"
  # A fresh database and bucket prefix per run (the scale phase seeds millions of rows),
  # both removed at the end: a run writes gigabytes.
  db=strata_bench_$(date +%s)
  psql "$STRATA_TEST_POSTGRES" -qc "create database $db" >/dev/null
  trap 'psql "$STRATA_TEST_POSTGRES" -qc "drop database if exists $db with (force)" >/dev/null 2>&1 || true' EXIT
  dsn=${STRATA_TEST_POSTGRES%/*}/$db?sslmode=disable
  bucket="s3://$STRATA_TEST_S3_ACCESS_KEY:$STRATA_TEST_S3_SECRET_KEY@strata-bench/$db?endpoint=$STRATA_TEST_S3_ENDPOINT&path_style=true"
  go run ./cmd/strata bench --catalog "$dsn" --bucket "$bucket" --create-bucket --delete-data "$@"
  ;;
*)
  echo "usage: scripts/bench.sh [embedded|postgres] [strata bench flags]" >&2
  exit 2
  ;;
esac
