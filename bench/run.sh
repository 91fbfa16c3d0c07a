#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the standard benchmarks against the default build and prints medians:
# gang placement, segments on the simulator, durable submissions and restart, a container's cost to a
# step's start, a gang's repair against Slurm's requeue, and Cohort side by side
# with Slurm 22.05 (installed by bench/peers/slurm/install.sh if missing).
# Results and how to read them: docs/performance.md.
#
# Environment: BENCH_DURABILITY_JOBS (jobs in state for the restart, default
# 20000; the figures in docs/performance.md use 100000), BENCH_SIDE_BY_SIDE=0
# to leave out the side-by-side set, and the SBS_* variables of
# bench/side_by_side.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/default
out=${BENCH_OUT:-$build/bench-results}
export BENCH_OUT=$out
mkdir -p "$out"
started=$SECONDS

echo "== placement: one 64-node gang at 50% occupancy, whole and in segments (median of 10 repetitions)"
"$build/bench/placement_bench" --benchmark_repetitions=10 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/placement.json" --benchmark_out_format=json

echo "== segments on the simulator: segment jobs on 32 NVLink blocks, none split, against first fit"
bash bench/segment_sim.sh "$build" | tee "$out/segment_sim.txt"
jobs=${BENCH_DURABILITY_JOBS:-20000}
echo "== durability: durable submissions/s per backend and StateSync, restart and takeover with $jobs jobs"
bash bench/durability.sh "$jobs" 4000 | tee "$out/durability.jsonl"

echo "== containers: a step's start with --container-image (warm cache) against the host, 1 and 8 nodes; a cold pull"
if [ "$(id -u)" = 0 ]; then
  bash bench/container_start.sh "$PWD/$build" | grep -v '^20' | tee "$out/containers.txt"
else
  echo "(skipped: containers need the agent to run as root)"
fi

echo "== gang repair: a node lost under an 8-node gang, detected to every rank running again, against Slurm's requeue"
if [ "$(id -u)" = 0 ]; then
  bash bench/repair.sh "$build" | tee "$out/repair.txt"
else
  echo "(skipped: the Slurm peer's slurmd must run as root)"
fi

if [ "${BENCH_SIDE_BY_SIDE:-1}" != 0 ]; then
  echo "== side by side with Slurm 22.05: 64 nodes, 8 leaf switches"
  bash bench/side_by_side.sh "$build"
fi
echo "results written to $out ($((SECONDS - started)) s)"
