#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Four clients submit without pause while the controller is killed with -9
# and restarted several times. Afterwards every submission that was given an
# id exists exactly once, no id was given twice, and no job ever ran twice at
# the same time.
source "$(dirname "$0")/lib.sh"
start_cluster

CLIENTS=4
PER_CLIENT=${CRASH_SUBMISSIONS:-40}
CRASHES=${CRASH_COUNT:-3}
mkdir -p "$WORK/running" "$WORK/double"
# Each rank holds a marker folder for its job while it runs: a second copy
# of the same job running at the same time cannot create it.
cat >"$WORK/rank.sh" <<'RANK'
#!/bin/sh
marker="$WORK_DIR/running/$COHORT_JOB_ID-$COHORT_NODE_RANK"
if ! mkdir "$marker" 2>/dev/null; then touch "$WORK_DIR/double/$COHORT_JOB_ID"; exit 1; fi
sleep 0.3  # long enough for a second copy to overlap it; the check is the mkdir
rmdir "$marker"
RANK
chmod +x "$WORK/rank.sh"
export WORK_DIR=$WORK

client() {
  local n=$1 i out id
  for i in $(seq "$PER_CLIENT"); do
    # A submission refused because the controller is down is retried; one
    # whose answer was lost may or may not exist, and is not counted.
    for _ in $(seq 100); do
      if out=$("$BIN/cli/cohort" submit -N $((i % 2 + 1)) -o /dev/null -- "$WORK/rank.sh" 2>&1); then
        id=$(sed -n 's/^Submitted job \([0-9]*\)$/\1/p' <<<"$out")
        echo "$id" >>"$WORK/client-$n.ids"
        break
      fi
      sleep 0.2  # the retry interval while the controller is down
    done
  done
}

CLIENT_PIDS=()
for n in $(seq "$CLIENTS"); do
  client "$n" &
  CLIENT_PIDS+=($!)
done
# Pacing only: the crashes land while the clients submit and jobs run, and
# the clients meet a controller that is down. No check depends on how much
# happened in between: they all wait for every acknowledged job to finish.
for _ in $(seq "$CRASHES"); do
  sleep 1.5
  crash_controller
  sleep 0.3
  restart_controller
done
for pid in "${CLIENT_PIDS[@]}"; do wait "$pid"; done

ids=$(cat "$WORK"/client-*.ids)
count=$(wc -l <<<"$ids")
[ "$count" -eq $((CLIENTS * PER_CLIENT)) ] || fail "only $count of $((CLIENTS * PER_CLIENT)) submissions got an id"
dups=$(sort -n <<<"$ids" | uniq -d)
[ -z "$dups" ] || fail "ids given to two submissions: $dups"
pass "$count submissions across $CRASHES crashes got $count distinct ids"

wait_until 30 all_nodes_up || fail "agents did not come back"
all_finished() {
  local id
  for id in $ids; do finished "$id" || return 1; done
}
wait_until 120 all_finished || fail "not every acknowledged job finished"
missing=0
states=""
for id in $ids; do
  state=$(job_state "$id")
  [ -n "$state" ] || missing=$((missing + 1))
  states+="$state"$'\n'
done
[ "$missing" -eq 0 ] || fail "$missing acknowledged jobs are gone"
pass "every acknowledged job exists: $(sed "/^$/d" <<<"$states" | sort | uniq -c | tr -s " \n" " ")"

doubles=$(ls "$WORK/double")
[ -z "$doubles" ] || fail "jobs that ran twice at the same time: $doubles"
pass "no job ran twice at the same time"

next=$(submit -N 1 -- true)
max=$(sort -n <<<"$ids" | tail -1)
[ "$next" -gt "$max" ] || fail "new id $next is not above every earlier id ($max)"
pass "ids keep increasing after the crashes"
finish_test
