#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Segments on the simulator: on a GB200 NVL72 layout of 32 racks (576 nodes
# of 4 GPUs, each rack one NVLink block of 18, four racks to an InfiniBand
# leaf), a generated three-day trace whose gangs ask for --segment=S is
# replayed on Cohort's engine (3 days, 0.85 offered load); the share of segment jobs none of whose
# segments splits a block, as Cohort placed them and as first fit would
# have on the same free nodes (docs/simulator.md, "segment jobs").
#
# Usage: bench/segment_sim.sh [BUILD] [SEEDS]   (default build/default, 3 seeds)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
seeds=${2:-3}
sim=$build/tools/sim/cohort-sim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
conf=$work/cohort.conf
topo=$work/topology.conf
sed 's/gb\[001-144\]/gb[001-576]/' tests/data/traces/gb200-nvl72.conf >"$conf"
cat >"$topo" <<'TOPO'
BlockName=nvl72-[01-32] Nodes=gb[001-576]
SwitchName=ib-leaf[1-8] Nodes=gb[001-576]
SwitchName=ib-spine Switches=ib-leaf[1-8]
TOPO
printf '%-8s %-5s %12s %14s %22s %10s\n' segment seed "segment jobs" "Cohort whole" \
  "first fit whole (of)" "wait p50"
for segment in 18 4; do
  for seed in $(seq 1 "$seeds"); do
    "$sim" --generate --days 3 --seed "$seed" --load 0.85 --segment "$segment" \
      -c "$conf" -t "$topo" -o "$work/trace.csv" 2>/dev/null
    "$sim" -c "$conf" -t "$topo" --trace "$work/trace.csv" --json >"$work/report.json"
    python3 - "$work/report.json" "$segment" "$seed" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["placement"]
print(f'{sys.argv[2]:<8} {sys.argv[3]:<5} {p["segment_jobs"]:>12} '
      f'{100 * p["segment_whole_share"]:>13.1f}% '
      f'{100 * p["first_fit_whole_share"]:>14.1f}% ({p["first_fit_compared"]:>4}) '
      f'{r["wait_s"]["p50"]:>9.0f}s')
PY
  done
done
