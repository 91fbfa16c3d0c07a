#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durable submissions per second with 1, 4 and 16 concurrent clients, and
# the controller's restart time with many jobs in its state. A controller
# without agents (jobs stay pending) on the demo cluster config, in a
# temporary folder, StateSync as given (default full).
#
#   bench/durability.sh [full|normal|off] [JOBS_IN_STATE]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/default}
sync=${1:-full}
big=${2:-100000}
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-durability.XXXXXX")
pid=
cleanup() {
  [ -s "$work/pid" ] && kill -9 "$(cat "$work/pid")" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"
cat >"$work/cohort.conf" <<CONF
StateDir=$work/state
AuthKeyFile=$work/key
StateSync=$sync
TopologyFile=$PWD/etc/demo/topology.conf
Include=$PWD/etc/demo/cluster.conf
CONF

start() {
  rm -f "$work/port"
  local t0
  t0=$(date +%s%N)
  "$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
    --port-file "$work/port" --log-level warn >>"$work/controller.log" 2>&1 &
  pid=$!
  echo "$pid" >"$work/pid"
  until COHORT_CONTROLLER="unix:$work/state/cohort.sock" "$build/cli/cohort" nodes >/dev/null 2>&1; do
    kill -0 "$pid" || { echo "controller died:"; tail "$work/controller.log"; exit 1; }
    sleep 0.005
  done
  echo $((($(date +%s%N) - t0) / 1000000))
}
crash() {
  pid=$(cat "$work/pid")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  pid=
}

echo "== durable submissions (StateSync=$sync; each client: its own connection, one call at a time)"
start >/dev/null
for clients in 1 4 16; do
  per=$((4000 / clients))
  "$build/bench/submit_load" "unix:$work/state/cohort.sock" "$clients" "$per" | tee -a "$work/results.json"
done

echo "== restart with $big jobs in state"
have=$((4000 / 1 + 4000 / 4 * 4 + 4000 / 16 * 16))
if [ "$big" -gt "$have" ]; then
  "$build/bench/submit_load" "unix:$work/state/cohort.sock" 16 $(((big - have) / 16)) >/dev/null
fi
crash
for run in 1 2 3; do
  ms=$(start)
  echo "{\"restart_to_serving_ms\": $ms, \"run\": $run, \"db_mb\": $(du -m "$work/state/state.db" | cut -f1)}"
  crash
done
echo "(restart_to_serving_ms: from exec to the first answered cohort nodes, which alone takes ~20-30 ms)"
