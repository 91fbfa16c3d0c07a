#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durable submissions per second with 1, 4 and 16 concurrent clients under
# each StateSync setting, on each state backend (in one run, so the ratios
# compare like with like), the controller's restart time with many jobs in
# its state, and, with PostgreSQL, the time a standby takes to serve after
# the active controller is killed. A controller without agents (jobs stay
# pending) on the demo cluster config, in a temporary folder; PostgreSQL is
# a server of the benchmark's own (Debian's postgresql-15, its default
# settings, on a Unix socket in that folder; run as the user cohort-pgtest
# when the benchmark runs as root, since initdb refuses root). Prints JSON
# lines; docs/performance.md has results.
#
#   bench/durability.sh [JOBS_IN_STATE (default 100000)] [SUBMISSIONS_PER_RUN (default 4000)]
#   BACKENDS="sqlite postgresql" (the default) chooses the backends.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/default}
big=${1:-100000}
per_run=${2:-4000}
backends=${BACKENDS:-sqlite postgresql}
pg_bin=/usr/lib/postgresql/15/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-durability.XXXXXX")
chmod 755 "$work"
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u cohort-pgtest -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "$work"/pid*; do [ -s "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null; done
  [ -d "$work/pg/data" ] && as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
head -c 32 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"

# start_postgres: a fresh server and database; sets conninfo.
start_postgres() {
  if [ "$(id -u)" -eq 0 ] && ! id cohort-pgtest >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin cohort-pgtest
  fi
  mkdir -p "$work/pg"
  [ "$(id -u)" -eq 0 ] && chown cohort-pgtest "$work/pg"
  as_pg "$pg_bin/initdb" -D "$work/pg/data" -U cohort --auth=trust -E UTF8 >/dev/null
  as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories='$work/pg'" start >/dev/null
  conninfo="host=$work/pg dbname=postgres user=cohort"
}
stop_postgres() {
  as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -m fast -w stop >/dev/null
  rm -rf "$work/pg"
}

configure() {  # configure BACKEND SYNC
  local backend=""
  [ "$1" = postgresql ] && backend="StateBackend=postgresql
StateDatabase=\"$conninfo\"
ControllerTimeout=10"
  cat >"$work/cohort.conf" <<CONF
StateDir=$work/state
AuthType=none
AuthKeyFile=$work/key
StateSync=$2
$backend
TopologyFile=$PWD/etc/demo/topology.conf
Include=$PWD/etc/demo/cluster.conf
CONF
}

# start [NAME]: a controller (its own StateDir and socket per NAME); prints
# milliseconds from exec to the first answered `cohort nodes` (which alone
# takes ~20-30 ms). A standby does not answer it: it waits for the lease.
start() {
  local name=${1:-a} t0
  t0=$(date +%s%N)
  # In a subshell, so that killing it is no job of this shell's to report.
  ("$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
    --state-dir "$work/state-$name" --log-level warn >>"$work/controller.log" 2>&1 &
    echo $! >"$work/pid-$name")
  wait_serving "$name"
  echo $((($(date +%s%N) - t0) / 1000000))
}
wait_serving() {
  until COHORT_CONTROLLER="unix:$work/state-$1/cohort.sock" "$build/cli/cohort" nodes \
    >/dev/null 2>&1; do
    kill -0 "$(cat "$work/pid-$1")" || { echo "controller died:" >&2; tail "$work/controller.log" >&2; exit 1; }
    sleep 0.005
  done
}
crash() {
  local pid
  pid=$(cat "$work/pid-${1:-a}")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  rm -f "$work/pid-${1:-a}"
}
db_mb() {
  if [ "$1" = postgresql ]; then
    psql "$conninfo" -Atc "SELECT pg_database_size(current_database()) / 1048576"
  else
    du -m "$work/state-a/state.db" | cut -f1
  fi
}

for backend in $backends; do
  syncs="full normal off"
  # synchronous_commit has two settings: normal and off are the same there.
  [ "$backend" = postgresql ] && syncs="full off"
  for sync in $syncs; do
    echo "== durable submissions, $backend, StateSync=$sync (each client: its own connection, one call at a time)"
    rm -rf "$work"/state-*
    [ "$backend" = postgresql ] && start_postgres
    configure "$backend" "$sync"
    start >/dev/null
    for clients in 1 4 16; do
      "$build/bench/submit_load" "unix:$work/state-a/cohort.sock" "$clients" $((per_run / clients)) |
        sed "s/^{/{\"backend\": \"$backend\", \"sync\": \"$sync\", /"
    done
    crash
    [ "$backend" = postgresql ] && stop_postgres
  done

  echo "== restart with $big pending jobs in state, $backend (StateSync=full)"
  rm -rf "$work"/state-*
  [ "$backend" = postgresql ] && start_postgres
  configure "$backend" full
  start >/dev/null
  "$build/bench/submit_load" "unix:$work/state-a/cohort.sock" 16 $((big / 16)) >/dev/null
  crash
  for run in 1 2 3; do
    ms=$(start)
    echo "{\"backend\": \"$backend\", \"restart_to_serving_ms\": $ms, \"jobs\": $big, \"run\": $run, \"db_mb\": $(db_mb "$backend")}"
    crash
  done
  if [ "$backend" = postgresql ]; then
    # A standby beside the active controller; the active one killed.
    start a >/dev/null
    for run in 1 2 3; do
      standby=b
      [ $((run % 2)) -eq 0 ] && standby=a
      active=a
      [ "$standby" = a ] && active=b
      : >"$work/standby.log"
      ("$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
        --state-dir "$work/state-$standby" >>"$work/standby.log" 2>&1 &
        echo $! >"$work/pid-$standby")
      # Once it polls the lease and names the active controller.
      until grep -q "standby active=127" "$work/standby.log"; do sleep 0.01; done
      t0=$(date +%s%3N)
      crash "$active"
      wait_serving "$standby"
      # From the kill to the new active controller's first moment of
      # serving, as its log stamps it (a command polling meanwhile also
      # counts its own retries while none is active).
      serving=$(date -d "$(sed -n 's/^\([^ ]*\) .*controller_started .*/\1/p' "$work/standby.log" |
        tr T ' ')" +%s%3N)
      echo "{\"backend\": \"$backend\", \"takeover_to_serving_ms\": $((serving - t0)), \"jobs\": $big, \"run\": $run}"
    done
    crash "$standby"
    stop_postgres
  fi
done
