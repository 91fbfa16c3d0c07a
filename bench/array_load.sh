#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Does a 10,000-task array slow the controller down? On the demo cluster,
# filled with long jobs so nothing else starts, measure `cohort submit` of a
# one-node job and `cohort queue`, first with an empty queue, then with a
# 10,000-task array pending, then with 10,000 single jobs pending. Prints
# medians of 20 and the ratios. Usage: bench/array_load.sh [BUILD_DIR]
root=$(cd "$(dirname "$0")/.." && pwd)
set -- "${1:-$root/build/default}" "$root"
source "$root/tests/integration/lib.sh"
start_cluster
tasks=${ARRAY_TASKS:-10000}
mkdir -p "$WORK/m"

# Fill every node so that queued work stays queued.
for _ in $(seq 16); do submit -N 1 --exclusive -t 30 -o /dev/null -- sleep 1800 >/dev/null; done
filled() { [ "$(cohort queue --noheader -t RUNNING -o '%i' | wc -l)" -eq 16 ]; }
wait_until 60 filled || { fail "the cluster did not fill"; finish_test; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() {  # measure LABEL: 20 submits and 20 queue listings, medians in ms
  local label=$1 s e
  : >"$WORK/m/$label.submit"; : >"$WORK/m/$label.queue"
  for _ in $(seq 20); do
    s=$(date +%s%N); cohort submit -N 1 -o /dev/null -- true >/dev/null; e=$(date +%s%N)
    echo $(((e - s) / 1000)) >>"$WORK/m/$label.submit"
    s=$(date +%s%N); cohort queue >/dev/null; e=$(date +%s%N)
    echo $(((e - s) / 1000)) >>"$WORK/m/$label.queue"
  done
  printf '%-28s submit p50 %6.1f ms   queue p50 %7.1f ms\n' "$label" \
    "$(median <"$WORK/m/$label.submit" | awk '{print $1/1000}')" \
    "$(median <"$WORK/m/$label.queue" | awk '{print $1/1000}')"
}

measure "empty queue"
s=$(date +%s%N)
array=$(submit --array="0-$((tasks - 1))" -o /dev/null -- true)
e=$(date +%s%N)
echo "submitting the ${tasks}-task array took $(((e - s) / 1000000)) ms (one call)"
measure "${tasks}-task array pending"
cohort cancel "$array"
for id in $(cohort queue --noheader -t PENDING -o '%i'); do cohort cancel "$id"; done
s=$(date +%s%N)
"$BIN/bench/submit_load" "$COHORT_CONTROLLER" 4 $((tasks / 4)) >"$WORK/m/load.json"
e=$(date +%s%N)
echo "submitting ${tasks} single jobs (4 gRPC clients) took $(((e - s) / 1000000)) ms"
measure "${tasks} single jobs pending"
awk -v a="$(median <"$WORK/m/empty queue.submit")" -v b="$(median <"$WORK/m/${tasks}-task array pending.submit")" \
  -v c="$(median <"$WORK/m/${tasks} single jobs pending.submit")" \
  'BEGIN {printf "submit p50 ratio: array pending / empty %.2f, single jobs pending / empty %.2f\n", b/a, c/a}'
# Ranks outlive their agent by design: end the long jobs before stopping it.
for id in $(cohort queue --noheader -o '%i'); do cohort cancel "$id" 2>/dev/null; done
none_running() { [ -z "$(cohort queue --noheader -t RUNNING,COMPLETING -o '%i')" ]; }
wait_until 60 none_running || fail "jobs were still running at the end"
finish_test
