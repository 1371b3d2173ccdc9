#!/usr/bin/env bash
# Starts what the integration tests need on this machine: PostgreSQL 15 (installed, not
# running) — the catalog's cluster, and a second cluster with wal_level=logical that the
# Postgres change-data-capture tests capture from (separate, so that a replication slot a
# test leaves behind can never pin the catalog's WAL) — and MinIO (built once from the
# pinned module and cached), installs kcat (and, under CI, chromium) when missing, then
# prints the environment the tests read. Idempotent: running services are reused.
#
#   eval "$(scripts/services.sh)"
set -euo pipefail

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
MINIO_BIN=$CACHE/bin/minio
MINIO_PORT=${STRATA_MINIO_PORT:-9100}
MINIO_DATA=${STRATA_MINIO_DATA:-$CACHE/minio-data}
PG_USER=strata
PG_PASS=strata
PG_DB=strata_test
CDC_PORT=${STRATA_CDC_PORT:-5433}
CDC_CLUSTER=strata_cdc

log() { echo "services: $*" >&2; }

start_postgres() {
  if ! command -v pg_ctlcluster >/dev/null; then
    log "pg_ctlcluster not found: installing postgresql"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  fi
  local ver
  ver=$(pg_lsclusters -h | awk 'NR==1{print $1}')
  # Room for the connections of two test lanes at once (scripts/test.sh), each with
  # several nodes' pools (the default is 100).
  local conf=/etc/postgresql/$ver/main/conf.d/strata.conf want="max_connections = 300"
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    echo "$want" >"$conf"
    chown postgres "$conf"
    if pg_lsclusters -h | awk '$2=="main"{print $4}' | grep -q online; then
      log "restarting postgres $ver/main for its new settings"
      pg_ctlcluster --skip-systemctl-redirect "$ver" main restart >&2
    fi
  fi
  if ! pg_lsclusters -h | awk '$2=="main"{print $4}' | grep -q online; then
    log "starting postgres $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start >&2
  fi
  for _ in $(seq 1 50); do
    su postgres -c "psql -qAtc 'select 1'" >/dev/null 2>&1 && break
    sleep 0.2
  done
  su postgres -c "psql -qAtc \"select 1 from pg_roles where rolname='$PG_USER'\"" | grep -q 1 ||
    su postgres -c "psql -qc \"create role $PG_USER login createdb password '$PG_PASS'\"" >&2
  # Tests drop their databases WITH (FORCE), which must be allowed to end sessions.
  su postgres -c "psql -qc 'grant pg_signal_backend to $PG_USER'" >/dev/null 2>&1 || true
  su postgres -c "psql -qAtc \"select 1 from pg_database where datname='$PG_DB'\"" | grep -q 1 ||
    su postgres -c "psql -qc 'create database $PG_DB owner $PG_USER'" >&2
}

# The change-data-capture source's cluster: logical decoding on, room for the slots and
# walsenders of tests running side by side, and a bound on the WAL a forgotten slot may
# hold (a slot beyond it is invalidated — wal_status 'lost' — rather than fill the disk).
start_cdc_postgres() {
  local ver
  ver=$(pg_lsclusters -h | awk 'NR==1{print $1}')
  if ! pg_lsclusters -h | awk '{print $2}' | grep -qx "$CDC_CLUSTER"; then
    log "creating postgres cluster $ver/$CDC_CLUSTER on port $CDC_PORT (wal_level=logical)"
    pg_createcluster "$ver" "$CDC_CLUSTER" -p "$CDC_PORT" -- --auth-local=peer --auth-host=scram-sha-256 >&2
  fi
  local conf=/etc/postgresql/$ver/$CDC_CLUSTER/conf.d/strata-cdc.conf want
  want=$(cat <<CONF
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_slot_wal_keep_size = 256MB
wal_sender_timeout = 60s
shared_buffers = 64MB
max_connections = 200
CONF
)
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    echo "$want" >"$conf"
    chown postgres "$conf"
    if pg_lsclusters -h | awk -v c="$CDC_CLUSTER" '$2==c{print $4}' | grep -q online; then
      log "restarting postgres $ver/$CDC_CLUSTER for its new settings"
      pg_ctlcluster --skip-systemctl-redirect "$ver" "$CDC_CLUSTER" restart >&2
    fi
  fi
  if ! pg_lsclusters -h | awk -v c="$CDC_CLUSTER" '$2==c{print $4}' | grep -q online; then
    log "starting postgres $ver/$CDC_CLUSTER"
    pg_ctlcluster --skip-systemctl-redirect "$ver" "$CDC_CLUSTER" start >&2
  fi
  local q="su postgres -c"
  for _ in $(seq 1 50); do
    $q "psql -p $CDC_PORT -qAtc 'select 1'" >/dev/null 2>&1 && break
    sleep 0.2
  done
  $q "psql -p $CDC_PORT -qAtc \"select 1 from pg_roles where rolname='$PG_USER'\"" | grep -q 1 ||
    $q "psql -p $CDC_PORT -qc \"create role $PG_USER login createdb replication password '$PG_PASS'\"" >&2
  # pg_signal_backend: a task taking a slot over ends the walsender its predecessor left;
  # pg_checkpoint: the lost-slot test checkpoints so that WAL past the limit is removed.
  $q "psql -p $CDC_PORT -qc 'grant pg_signal_backend, pg_checkpoint to $PG_USER'" >/dev/null 2>&1 || true
  $q "psql -p $CDC_PORT -qAtc \"select 1 from pg_database where datname='$PG_DB'\"" | grep -q 1 ||
    $q "psql -p $CDC_PORT -qc 'create database $PG_DB owner $PG_USER'" >&2
}

start_minio() {
  if [ ! -x "$MINIO_BIN" ]; then
    log "building MinIO $MINIO_VERSION (about five minutes, cached in $CACHE/bin)"
    mkdir -p "$CACHE/bin"
    (cd /tmp && GOBIN="$CACHE/bin" GOFLAGS=-buildvcs=false go install "github.com/minio/minio@$MINIO_VERSION") >&2
  fi
  # Deleted objects wait in MinIO's trash, which it empties slowly: a bench run writes and
  # deletes gigabytes, and a few runs in a row filled the disk to MinIO's free-space floor
  # (PUTs answered 507 XMinioStorageFull). Nothing in the trash is read again.
  rm -rf "$MINIO_DATA/.minio.sys/tmp/.trash/"* 2>/dev/null || true
  if ! curl -fsS "http://127.0.0.1:$MINIO_PORT/minio/health/live" >/dev/null 2>&1; then
    log "starting MinIO on 127.0.0.1:$MINIO_PORT"
    mkdir -p "$MINIO_DATA"
    MINIO_ROOT_USER=strata MINIO_ROOT_PASSWORD=stratasecret MINIO_BROWSER=off \
      setsid nohup "$MINIO_BIN" server --quiet --address "127.0.0.1:$MINIO_PORT" "$MINIO_DATA" \
      >"$CACHE/minio.log" 2>&1 </dev/null &
    for _ in $(seq 1 100); do
      curl -fsS "http://127.0.0.1:$MINIO_PORT/minio/health/live" >/dev/null 2>&1 && break
      sleep 0.2
    done
    curl -fsS "http://127.0.0.1:$MINIO_PORT/minio/health/live" >/dev/null || { cat "$CACHE/minio.log" >&2; exit 1; }
  fi
}

# kcat (Debian's 1.7.1, librdkafka 2.0.2) is the Kafka listener's reference client in
# the tests; they fail under CI without it.
install_kcat() {
  if ! command -v kcat >/dev/null; then
    log "kcat not found: installing kcat"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >&2
  fi
}

# Chromium (Debian's) drives the web console's browser tests (ui/browser_test.go): under
# CI, as root, it is installed when missing — the tests fail under CI without it;
# elsewhere they skip, saying how to install it.
install_chromium() {
  if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    return
  fi
  if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
    log "chromium not found: installing chromium"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  else
    log "chromium not found: the browser tests will skip (apt-get install chromium)"
  fi
}

start_postgres
start_cdc_postgres
start_minio
install_kcat
install_chromium
cat <<ENV
export STRATA_TEST_POSTGRES='postgres://$PG_USER:$PG_PASS@127.0.0.1:5432/$PG_DB?sslmode=disable'
export STRATA_TEST_CDC_POSTGRES='postgres://$PG_USER:$PG_PASS@127.0.0.1:$CDC_PORT/$PG_DB?sslmode=disable'
export STRATA_TEST_S3_ENDPOINT='http://127.0.0.1:$MINIO_PORT'
export STRATA_TEST_S3_ACCESS_KEY=strata
export STRATA_TEST_S3_SECRET_KEY=stratasecret
export STRATA_TEST_S3_REGION=us-east-1
ENV
