#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The 16,384-node benchmark: a real cohort-controller over a generated
# three-level fat tree (512 leaves of 32 nodes, 32 spines of 16 leaves, one
# core), fake-exec emulating agents on 127.0.0.1 (`cohort-agent --emulate N
# --fake-exec`: no process per rank), and 100,000 jobs of 1 to 256 nodes
# queued behind long jobs that hold every node; the long jobs are then
# cancelled one by one, and each pass goes over the whole queue. Prints a
# table and writes JSON; results in docs/performance.md.
#
#   bash bench/scale/run.sh [BUILD_DIR]        (default build/default)
#   SCALE_NODES=1024 SCALE_JOBS=5000 bash bench/scale/run.sh build/default   (a quick try)
#
# Measures: the engine alone in process (bench/scale/engine_scale: pass,
# submission and tick times at this scale), then end to end: scheduling pass
# time (the controller's `pass took_us=` debug line), SubmitJob latency from a gRPC client,
# and with the queue full `cohort submit` and `cohort queue` as a user runs them (the
# socket found from cohort.conf), controller VmRSS/VmHWM.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build/default}" && pwd)
nodes=${SCALE_NODES:-16384}
jobs=${SCALE_JOBS:-100000}
agents=${SCALE_AGENTS:-4}
clients=${SCALE_CLIENTS:-8}
measure_s=${SCALE_MEASURE_S:-48}
out=${BENCH_OUT:-$build/bench-results}
per_leaf=32
leaves=$((nodes / per_leaf))
leaves_per_spine=16
spines=$(((leaves + leaves_per_spine - 1) / leaves_per_spine))
if [ $((nodes % per_leaf)) -ne 0 ] || [ $((nodes % agents)) -ne 0 ]; then
  echo "SCALE_NODES=$nodes must be a multiple of $per_leaf and of SCALE_AGENTS=$agents" >&2
  exit 2
fi
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-scale.XXXXXX")
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ -n "${KEEP_WORK:-}" ]; then echo "work folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
cohort() { "$build/cli/cohort" "$@"; }
ms() { date +%s%3N; }
# us VAR: the wall clock in microseconds, without starting a process (a
# `date` before and after a command adds its own start-up to the figure).
us() { printf -v "$1" '%s' "${EPOCHREALTIME/./}"; }

# The fat tree: gpu00001..gpuNNNNN.
name() { printf 'gpu%05d' "$1"; }
{
  for ((l = 0; l < leaves; l++)); do
    printf 'SwitchName=leaf%03d Nodes=gpu[%05d-%05d]\n' "$l" $((l * per_leaf + 1)) $(((l + 1) * per_leaf))
  done
  for ((s = 0; s < spines; s++)); do
    last=$(((s + 1) * leaves_per_spine - 1)); [ "$last" -ge "$leaves" ] && last=$((leaves - 1))
    printf 'SwitchName=spine%02d Switches=leaf[%03d-%03d]\n' "$s" $((s * leaves_per_spine)) "$last"
  done
  printf 'SwitchName=core Switches=spine[00-%02d]\n' $((spines - 1))
} >"$work/topology.conf"
head -c 32 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"
cat >"$work/cohort.conf" <<CONF
ClusterName=scale
StateDir=$work/state
AuthKeyFile=$work/key
ControllerAddr=127.0.0.1
ControllerPort=0
TopologyFile=$work/topology.conf
NodeName=gpu[00001-$(printf %05d "$nodes")] CPUs=224 MemoryMB=2000000 Gpus=8
PartitionName=train Nodes=ALL Default=YES MaxTime=UNLIMITED
CONF

# First the engine alone, in process: what the controller's state thread
# spends on a pass, a submission and a tick, without RPCs or the store.
echo "== the scheduling engine alone: $nodes nodes, $jobs jobs queued"
"$build/bench/scale/engine_scale" --nodes "$nodes" --jobs "$jobs" --json "$out/engine-scale.json"

echo "== $nodes nodes ($leaves leaves, $spines spines, 1 core), $agents fake-exec agents, $jobs jobs"
"$build/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port 0 \
  --port-file "$work/port" --log-level debug >"$work/controller.log" 2>&1 &
controller=$!
pids+=("$controller")
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "controller did not start" >&2; tail "$work/controller.log" >&2; exit 1; }
export COHORT_CONTROLLER="unix:$work/state/cohort.sock" COHORT_CONF="$work/cohort.conf"
per_agent=$((nodes / agents))
t0=$(ms)
for ((a = 0; a < agents; a++)); do
  first=$((a * per_agent + 1)); last=$(((a + 1) * per_agent))
  "$build/daemons/agent/cohort-agent" -c "$work/cohort.conf" --controller "127.0.0.1:$(cat "$work/port")" \
    --emulate "$per_agent" --nodes "gpu[$(printf %05d $first)-$(printf %05d $last)]" --fake-exec \
    --spool "$work/spool$a" --log-level warn >"$work/agent$a.log" 2>&1 &
  pids+=("$!")
done
registered() { grep -c 'node_state node=[^ ]* state=IDLE' "$work/controller.log" || true; }
for _ in $(seq 1200); do [ "$(registered)" -ge "$nodes" ] && break; sleep 0.5; done
[ "$(registered)" -ge "$nodes" ] || { echo "only $(registered) of $nodes nodes registered" >&2; exit 1; }
register_ms=$(($(ms) - t0))
echo "registered $nodes nodes in $register_ms ms"

# Long jobs hold every node first, so that the queue fills behind them; then
# cancelling them one at a time frees 256 nodes a time and each pass goes
# over the whole queue.
blockers=$((nodes / 256))
echo "== $blockers jobs of 256 nodes hold the cluster"
block_ids=()
for ((b = 0; b < blockers; b++)); do
  block_ids+=("$(COHORT_FAKE_RUNTIME=86400 cohort submit -N 256 --gpus-per-node 8 -o /dev/null -- /opt/train |
    sed -n 's/^Submitted job \([0-9]*\)$/\1/p')")
done
echo "== filling the queue: $jobs jobs from $clients clients"
fill=$("$build/bench/scale/scale_load" "unix:$work/state/cohort.sock" "$clients" $((jobs / clients)) 60 1200 1)
echo "fill: $fill"

echo "== measuring with the queue full"
# From here the commands find the controller as a user's do: from the
# socket that cohort.conf's StateDir names (COHORT_CONF), reading the file.
unset COHORT_CONTROLLER
one=$("$build/bench/scale/scale_load" "unix:$work/state/cohort.sock" 1 500 60 1200 2)
echo "SubmitJob, 1 client, 500 calls: $one"
# `cohort submit` from its start to its exit, 200 in a row (bench/command_latency.cpp;
# timed from a shell, each run would also count the shell's fork).
submit=$("$build/bench/command_latency" 200 "$build/cli/cohort" submit -N 1 -o /dev/null -- true)
echo "cohort submit, 200 in a row: $submit"
queue_times=()
for _ in 1 2 3; do
  us s; cohort queue >"$work/queue.txt"; us e
  queue_times+=($((e - s)))
done
queued=$(($(wc -l <"$work/queue.txt") - 1))
us s; cohort queue --json >/dev/null; us e
queue_json_us=$((e - s))
pending=$(grep -c ' PENDING ' "$work/queue.txt" || true)
running=$(grep -c ' RUNNING ' "$work/queue.txt" || true)
fill_done_line=$(wc -l <"$work/controller.log")
cancels=${SCALE_CANCELS:-16}
echo "== cancelling $cancels of the long jobs, ${measure_s} s in all"
for ((b = 0; b < cancels && b < blockers; b++)); do
  cohort cancel "${block_ids[$b]}" >/dev/null
  sleep "$(awk -v t="$measure_s" -v n="$cancels" 'BEGIN {print t / n}')"
done
status=$(cat /proc/"$controller"/status)
rss_kb=$(awk '/^VmRSS/ {print $2}' <<<"$status")
hwm_kb=$(awk '/^VmHWM/ {print $2}' <<<"$status")
agent_rss_kb=$(awk '/^VmRSS/ {print $2}' /proc/"${pids[1]}"/status)

# Pass times after the fill (queue full) and over the whole run.
passes() { sed -n 's/.*pass took_us=\([0-9]*\) .*/\1/p'; }
stats() {
  sort -n | awk '{v[NR] = $1} END {
    if (NR == 0) { print "{\"count\": 0}"; exit }
    p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1];
    printf "{\"count\": %d, \"p50_us\": %d, \"p99_us\": %d, \"max_us\": %d}", NR, p50, p99, v[NR] }'
}
pass_full=$(tail -n +"$fill_done_line" "$work/controller.log" | passes | stats)
pass_all=$(passes <"$work/controller.log" | stats)
queue_med=$(printf '%s\n' "${queue_times[@]}" | sort -n | awk '{v[NR]=$1} END {print v[2]}')

json=$(cat <<JSON
{"nodes": $nodes, "agents": $agents, "jobs": $jobs, "register_ms": $register_ms,
 "fill": $fill, "queue_rows": $queued, "pending": $pending, "running": $running,
 "pass_with_queue_full": $pass_full, "pass_whole_run": $pass_all,
 "submitjob_grpc_one_client": $one,
 "cohort_submit": $submit,
 "cohort_queue_us": {"median": $queue_med, "runs": [$(IFS=,; echo "${queue_times[*]}")], "json": $queue_json_us},
 "controller_kb": {"rss": $rss_kb, "hwm": $hwm_kb}, "agent_rss_kb": $agent_rss_kb}
JSON
)
echo "$json" >"$out/scale.json"
field() { sed -n "s/.*\"$1\": *{[^}]*\"$2\": *\([0-9.]*\).*/\1/p" <<<"$json" | head -1; }
echo
echo "| measurement ($nodes nodes, $pending pending, $running running) | value | target |"
echo "| --- | --- | --- |"
echo "| scheduling pass with the queue full (after each cancel), p50 / p99 / max ($(field pass_with_queue_full count) passes) | $(field pass_with_queue_full p50_us) / $(field pass_with_queue_full p99_us) / $(field pass_with_queue_full max_us) µs | ≤ 100 ms |"
echo "| SubmitJob (gRPC, 1 client), p50 / p99 | $(sed -n 's/.*"p50_ms": \([0-9.]*\).*/\1/p' <<<"$one") / $(sed -n 's/.*"p99_ms": \([0-9.]*\).*/\1/p' <<<"$one") ms | p99 ≤ 20 ms |"
echo "| \`cohort submit\` wall time, p50 / p99 / max (200 runs) | $(sed -n 's/.*"p50_ms": \([0-9.]*\).*/\1/p' <<<"$submit") / $(sed -n 's/.*"p99_ms": \([0-9.]*\).*/\1/p' <<<"$submit") / $(sed -n 's/.*"max_ms": \([0-9.]*\).*/\1/p' <<<"$submit") ms | p99 ≤ 20 ms |"
echo "| \`cohort queue\` ($queued rows), median of 3 | $((queue_med / 1000)) ms | |"
echo "| \`cohort queue --json\` | $((queue_json_us / 1000)) ms | |"
echo "| controller VmRSS / VmHWM | $((rss_kb / 1024)) / $((hwm_kb / 1024)) MiB | ≤ 2 GiB |"
echo "| one agent ($per_agent nodes) VmRSS | $((agent_rss_kb / 1024)) MiB | |"
echo "| registration of every node | $register_ms ms | |"
echo "| fill: $jobs SubmitJob from $clients clients | $(sed -n 's/.*"rate": \([0-9.]*\).*/\1/p' <<<"$fill") /s | |"
echo "results written to $out/scale.json"
