#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A first end-to-end measurement on the demo cluster (16 emulated nodes):
# `cohort submit` wall time, submission to all ranks of an 8-node job
# running, and 200 one-node jobs from 4 concurrent clients. Results in
# docs/performance.md. Usage: bench/dispatch_smoke.sh [BUILD_DIR]
root=$(cd "$(dirname "$0")/.." && pwd)
set -- "${1:-$root/build/default}" "$root"
source "$root/tests/integration/lib.sh"
start_cluster
mkdir -p "$WORK/m"
# 1. cohort submit wall time, 50 sequential
for i in $(seq 50); do
  s=$(date +%s%N); cohort submit -N 1 -o /dev/null -- true >/dev/null; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$WORK/m/submit_us"
done
sort -n "$WORK/m/submit_us" | awk '{a[NR]=$1} END {print "submit wall us: p50=" a[int(NR/2)] " p95=" a[int(NR*0.95)] " max=" a[NR]}'
sleep 2
# 2. dispatch: submission to all 8 ranks running, 8-node job, 20 times
for i in $(seq 20); do
  s=$(date +%s%N)
  id=$(submit -N 8 -o /dev/null -- sh -c "date +%s%N >> $WORK/m/start-\$SLURM_JOB_ID")
  wait_until 20 finished "$id"
  last=$(sort -n "$WORK/m/start-$id" | tail -1)
  echo $(( (last - s) / 1000 )) >> "$WORK/m/dispatch_us"
done
sort -n "$WORK/m/dispatch_us" | awk '{a[NR]=$1} END {print "8-node dispatch us (submit start -> last rank running): p50=" a[int(NR/2)] " max=" a[NR]}'
# 3. end-to-end: 200 one-node true jobs from 4 concurrent clients
s=$(date +%s%N)
clients=()
for c in 1 2 3 4; do ( for i in $(seq 50); do cohort submit -N 1 -o /dev/null -- true >/dev/null; done ) & clients+=($!); done
wait "${clients[@]}"
all_done() { local j; j=$(cohort queue --json) || return 1; ! grep -q '"id"' <<<"$j"; }
wait_until 120 all_done
e=$(date +%s%N)
echo "200 one-node jobs, 4 clients, submit to all done: $(( (e - s) / 1000000 )) ms"
finish_test
