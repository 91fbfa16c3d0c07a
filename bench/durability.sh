#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durable submissions per second with 1, 4 and 16 concurrent clients under
# each StateSync setting (in one run, so the ratios compare like with like),
# and the controller's restart time with many jobs in its state. A
# controller without agents (jobs stay pending) on the demo cluster config,
# in a temporary folder. Prints JSON lines; docs/performance.md has results.
#
#   bench/durability.sh [JOBS_IN_STATE (default 100000)] [SUBMISSIONS_PER_RUN (default 4000)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/default}
big=${1:-100000}
per_run=${2:-4000}
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-durability.XXXXXX")
cleanup() {
  [ -s "$work/pid" ] && kill -9 "$(cat "$work/pid")" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
head -c 32 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"

configure() {  # configure SYNC
  cat >"$work/cohort.conf" <<CONF
StateDir=$work/state
AuthKeyFile=$work/key
StateSync=$1
TopologyFile=$PWD/etc/demo/topology.conf
Include=$PWD/etc/demo/cluster.conf
CONF
}

# start: the controller; prints milliseconds from exec to the first answered
# `cohort nodes` (which alone takes ~20-30 ms).
start() {
  local t0
  t0=$(date +%s%N)
  # In a subshell, so that killing it is no job of this shell's to report.
  ("$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
    --log-level warn >>"$work/controller.log" 2>&1 &
    echo $! >"$work/pid")
  until COHORT_CONTROLLER="unix:$work/state/cohort.sock" "$build/cli/cohort" nodes >/dev/null 2>&1; do
    kill -0 "$(cat "$work/pid")" || { echo "controller died:" >&2; tail "$work/controller.log" >&2; exit 1; }
    sleep 0.005
  done
  echo $((($(date +%s%N) - t0) / 1000000))
}
crash() {
  local pid
  pid=$(cat "$work/pid")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  rm -f "$work/pid"
}

for sync in full normal off; do
  echo "== durable submissions, StateSync=$sync (each client: its own connection, one call at a time)"
  rm -rf "$work/state"
  configure "$sync"
  start >/dev/null
  for clients in 1 4 16; do
    "$build/bench/submit_load" "unix:$work/state/cohort.sock" "$clients" $((per_run / clients)) |
      sed "s/^{/{\"sync\": \"$sync\", /"
  done
  crash
done

echo "== restart with $big pending jobs in state (StateSync=full)"
rm -rf "$work/state"
configure full
start >/dev/null
"$build/bench/submit_load" "unix:$work/state/cohort.sock" 16 $((big / 16)) >/dev/null
crash
for run in 1 2 3; do
  ms=$(start)
  echo "{\"restart_to_serving_ms\": $ms, \"jobs\": $big, \"run\": $run, \"db_mb\": $(du -m "$work/state/state.db" | cut -f1)}"
  crash
done
