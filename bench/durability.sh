#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durable submissions per second with 1, 4 and 16 concurrent clients under
# each StateSync setting, on each state backend (in one run, so the ratios
# compare like with like), the controller's restart time with many jobs in
# its state, and, with PostgreSQL, the time a standby takes to serve after
# the active controller is killed. A controller without agents (jobs stay
# pending) on the demo cluster config, in a temporary folder; PostgreSQL is
# a server of the benchmark's own (scripts/pg_server.sh: Debian's
# postgresql-15 with its default settings, on a Unix socket in that
# folder). Prints JSON
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
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-durability.XXXXXX")
chmod 755 "$work"
cleanup() {
  for pid in "$work"/pid*; do [ -s "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null; done
  [ -d "$work/pg" ] && bash scripts/pg_server.sh stop "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
head -c 32 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"

# start_postgres: a fresh server (scripts/pg_server.sh, its default
# settings); sets conninfo.
start_postgres() { conninfo=$(bash scripts/pg_server.sh start "$work/pg"); }
stop_postgres() { bash scripts/pg_server.sh stop "$work/pg"; }

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
# milliseconds from exec to its first moment of serving, as its log stamps
# it (a command polling meanwhile would add its own retries: a standby
# redirects it while it waits for the lease).
start() {
  local name=${1:-a} t0
  : >"$work/controller-$name.log"
  t0=$(date +%s%3N)
  # In a subshell, so that killing it is no job of this shell's to report.
  ("$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
    --state-dir "$work/state-$name" >>"$work/controller-$name.log" 2>&1 &
    echo $! >"$work/pid-$name")
  wait_serving "$name"
  echo $(($(serving_at "$work/controller-$name.log") - t0))
}
# serving_at LOG: when the controller of LOG began to serve, in Unix ms.
serving_at() {
  date -d "$(sed -n 's/^\([^ ]*\) .*controller_started .*/\1/p' "$1" | tail -1 | tr T ' ')" +%s%3N
}
wait_serving() {
  until COHORT_CONTROLLER="unix:$work/state-$1/cohort.sock" "$build/cli/cohort" nodes \
    >/dev/null 2>&1; do
    kill -0 "$(cat "$work/pid-$1")" || { echo "controller died:" >&2; tail "$work/controller-$1.log" >&2; exit 1; }
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
      : >"$work/controller-$standby.log"
      ("$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
        --state-dir "$work/state-$standby" >>"$work/controller-$standby.log" 2>&1 &
        echo $! >"$work/pid-$standby")
      # Once it polls the lease and names the active controller.
      until grep -q "standby active=127" "$work/controller-$standby.log"; do sleep 0.01; done
      t0=$(date +%s%3N)
      crash "$active"
      wait_serving "$standby"
      echo "{\"backend\": \"$backend\", \"takeover_to_serving_ms\": $(($(serving_at "$work/controller-$standby.log") - t0)), \"jobs\": $big, \"run\": $run}"
    done
    crash "$standby"
    stop_postgres
  fi
done
