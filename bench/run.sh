#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the standard benchmarks against the default build and prints medians.
# Results and how to read them: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/default
out=${BENCH_OUT:-$build/bench-results}
mkdir -p "$out"

echo "== placement: one 64-node gang at 50% occupancy (median of 10 repetitions)"
"$build/bench/placement_bench" --benchmark_repetitions=10 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/placement.json" --benchmark_out_format=json


echo "== durability: durable submissions/s per StateSync, restart time with 100,000 jobs"
bash bench/durability.sh 100000 4000 | tee "$out/durability.jsonl"
echo "results written to $out"
