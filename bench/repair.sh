#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A lost node under an 8-node gang: the time from the loss being detected
# (the controller marks the node DOWN) to every rank of the job running
# again. Cohort repairs the gang in place from a spare it holds in its leaf
# (--spares=1); Slurm 22.05 requeues the same job (--requeue) and starts it
# again on the same shape. Every node a real node daemon on this host, one
# of them paused (SIGSTOP) to lose it; both with a 10-second node timeout,
# which the figure leaves out. One system at a time; prints each run and the
# medians, and writes $BENCH_OUT/repair.json. How to read it:
# docs/performance.md, "Gang repair".
#
#   bench/repair.sh [BUILD_DIR (default build/default)]
#
# Environment: REPAIR_RUNS (runs per system, default 3), REPAIR_SYSTEMS
# (default "cohort slurm"; Slurm is measured where bench/peers/slurm/install.sh
# installed it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/default}" && pwd)
runs=${REPAIR_RUNS:-3}
systems=${REPAIR_SYSTEMS:-cohort slurm}
out=${BENCH_OUT:-$build/bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
set -- "$build" "$root"
source "$root/tests/integration/lib.sh"
source "$root/bench/peers/slurm/cluster.sh"
trap 'slurm_stop || true; cleanup' EXIT
results=$WORK/repair.tsv  # SYSTEM RUN MILLISECONDS
: >"$results"

# ms_of "2026-12-06T09:00:00.123": milliseconds since the epoch.
ms_of() { date -d "$1" +%s%3N; }
# restarted FILE COUNT: how many ranks wrote a start line with
# SLURM_RESTART_COUNT=COUNT; last_start FILE COUNT: the latest of them, in ms.
restarted() { awk -v c="$2" '$1 == c' "$1" 2>/dev/null | wc -l; }
last_start() { awk -v c="$2" '$1 == c {print substr($2, 1, length($2) - 6)}' "$1" | sort -n | tail -1; }
# The gang's ranks: each says when it started, then waits.
rank_command() {
  echo "echo \"\${SLURM_RESTART_COUNT:-0} \$(date +%s%N)\" >>$1; exec sleep 600"
}

# --- Cohort: 9 nodes under one leaf, one real agent each ---------------------
cohort_run() {
  local run=$1 id victim pid starts detected back
  starts=$WORK/cohort-starts-$run
  id=$(submit -N 8 --spares=1 --exclusive -o /dev/null -- sh -c "$(rank_command "$starts")")
  wait_until 60 bash -c "[ \"\$(awk '\$1 == 0' $starts 2>/dev/null | wc -l)\" = 8 ]" ||
    { echo "cohort: job $id did not start its 8 ranks" >&2; return 1; }
  victim=$(cohort hostlist expand "$(cohort show job "$id" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["nodes"])')" | sed -n 4p)
  pid=${AGENT_OF[$victim]}
  kill -STOP "$pid"
  wait_until 60 bash -c "[ \"\$(awk '\$1 == 1' $starts 2>/dev/null | wc -l)\" = 8 ]" ||
    { kill -CONT "$pid"; echo "cohort: job $id was not repaired" >&2; return 1; }
  detected=$(grep "node_state node=$victim state=DOWN" "$WORK/controller.log" | tail -1 | cut -d' ' -f1)
  back=$(last_start "$starts" 1)
  echo -e "cohort\t$run\t$((back - $(ms_of "$detected")))" >>"$results"
  echo "cohort run $run: $victim DOWN at $detected, every rank again $((back - $(ms_of "$detected"))) ms later" >&2
  cohort cancel "$id" >/dev/null
  kill -CONT "$pid"
  wait_until 60 bash -c "$BIN/cli/cohort nodes -N | grep -q '^$victim .*drain'" || true
  cohort resume "$victim" >/dev/null
  wait_until 60 finished "$id" || echo "cohort: job $id did not end" >&2
}

cohort_measure() {
  local n
  cat >"$WORK/cluster.conf" <<CONF
NodeTimeout=10
KillWait=2
NodeName=n[001-009] CPUs=1 MemoryMB=64
PartitionName=gpu Nodes=ALL Default=YES MaxTime=UNLIMITED
CONF
  echo "SwitchName=leaf1 Nodes=n[001-009]" >"$WORK/topology.conf"
  IT_TLS=off write_cluster_conf "$WORK/cluster.conf" "$WORK/topology.conf"
  start_controller 0
  export COHORT_CONTROLLER="unix:$WORK/state/cohort.sock"
  declare -gA AGENT_OF
  for n in $(seq -f 'n%03g' 1 9); do
    mkdir -p "$WORK/spool-$n"
    "$BIN/daemons/agent/cohort-agent" -c "$WORK/cohort.conf" --node "$n" \
      --controller "127.0.0.1:$(cat "$WORK/port")" --spool "$WORK/spool-$n" \
      >>"$WORK/agent-$n.log" 2>&1 &
    AGENT_OF[$n]=$!
    PIDS+=("$!")
  done
  wait_until 60 all_nodes_up || { echo "cohort: nodes did not register" >&2; return 1; }
  for run in $(seq 1 "$runs"); do cohort_run "$run"; done
}

# --- Slurm: the peer's 64 nodes, 8 leaves of 8 ----------------------------------
slurm_run() {
  local run=$1 id victim pid starts detected back
  starts=$WORK/slurm-starts-$run
  printf '#!/bin/sh\nexec srun sh -c %q\n' "$(rank_command "$starts")" >"$WORK/slurm-job.sh"
  id=$(sbatch --parsable -N 8 --exclusive --requeue -o /dev/null "$WORK/slurm-job.sh")
  wait_until 60 bash -c "[ \"\$(awk '\$1 == 0' $starts 2>/dev/null | wc -l)\" = 8 ]" ||
    { echo "slurm: job $id did not start its 8 ranks" >&2; return 1; }
  victim=$(scontrol show hostnames "$(squeue -h -j "$id" -o %N)" | sed -n 4p)
  pid=${SLURM_PIDS[$((1 + 10#${victim#n}))]}
  kill -STOP "$pid"
  # What the job waits on meanwhile, every 2 s, for the report.
  (while :; do echo "$(date +%T) $(squeue -h -j "$id" -o '%T %r' 2>/dev/null)"; sleep 2; done) \
    >"$WORK/slurm-states-$run" &
  local sampler=$!
  wait_until 600 bash -c "[ \"\$(awk '\$1 == 1' $starts 2>/dev/null | wc -l)\" = 8 ]" ||
    { kill "$sampler"; kill -CONT "$pid"; echo "slurm: job $id did not run again" >&2; return 1; }
  kill "$sampler"
  echo "slurm run $run: what job $id waited on: $(awk '{$1=""; print}' "$WORK/slurm-states-$run" |
    uniq -c | tr -s ' ' | tr '\n' ';')" >&2
  detected=$(grep "$victim not responding, setting DOWN\|Nodes $victim not responding" \
    "$SLURM_DIR/log/slurmctld.log" | tail -1 | sed 's/^\[\([^]]*\)\].*/\1/')
  back=$(last_start "$starts" 1)
  echo -e "slurm\t$run\t$((back - $(ms_of "$detected")))" >>"$results"
  echo "slurm run $run: $victim DOWN at $detected, every rank again $((back - $(ms_of "$detected"))) ms later" >&2
  scancel "$id"
  kill -CONT "$pid"
  scontrol update nodename="$victim" state=resume 2>/dev/null || true
  slurm_drain_queue 120 || echo "slurm: job $id still in the queue after 120 s" >&2
}

slurm_measure() {
  if ! command -v slurmctld >/dev/null; then
    echo "slurm: not installed (make bench-peers); left out" >&2
    return 0
  fi
  SLURM_EXTRA_CONF="SlurmdTimeout=10" slurm_start "$WORK/slurm" nodelay
  for run in $(seq 1 "$runs"); do slurm_run "$run"; done
  slurm_stop
}

for system in $systems; do "${system}_measure"; done
python3 - "$results" "$out/repair.json" <<'PY'
import json, statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]) if line.strip()]
by = {}
for system, _, ms in rows:
    by.setdefault(system, []).append(int(ms))
report = {s: {"runs_ms": v, "median_ms": statistics.median(v)} for s, v in by.items()}
if "cohort" in by and "slurm" in by:
    report["ratio"] = report["cohort"]["median_ms"] / report["slurm"]["median_ms"]
json.dump(report, open(sys.argv[2], "w"), indent=2)
for s, r in report.items():
    if s != "ratio":
        print(f"{s:7} loss detected -> every rank running again: median {r['median_ms']:.0f} ms "
              f"({', '.join(str(x) for x in r['runs_ms'])})")
if "ratio" in report:
    print(f"Cohort / Slurm: {report['ratio']:.3f}")
PY
