#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Scheduling policy through the real CLI on the demo cluster (partitions gpu
# and high, PreemptMode=REQUEUE): preemption with a checkpointing sweep,
# arrays with a throttle, dependencies, holds, requeue, and the reports
# (why, priority, shares). Bad requests are refused with the reason.
source "$(dirname "$0")/lib.sh"
start_cluster
export PATH="$BIN/cli:$PATH"  # the sweep's tasks call cohort checkpoint-done

# --- bad input is refused and says why
for bad in "--array=5-2" "--dependency=afterok:999999" "--qos=nope" "--dependency=sometime:1"; do
  if out=$(cohort submit $bad -o /dev/null -- true 2>&1); then
    fail "submit $bad was accepted: $out"
  else
    pass "submit $bad refused: $(head -1 <<<"$out")"
  fi
done

# --- preemption: the sweep fills all 16 nodes, a high-tier job takes 4
export SWEEP_SECONDS=20 OUTDIR=$WORK  # the jobs' environment
sweep=$(submit --array=0-15 -o "$WORK/sweep-%A_%a.out" "$ROOT/etc/demo/sweep.sh")
[ -n "$sweep" ] || { fail "the sweep was refused"; finish_test; }
sweep_running() { [ "$(cohort queue --noheader -t RUNNING -o '%i' | grep -c "^${sweep}_")" -eq 16 ]; }
wait_until 60 sweep_running || fail "the sweep did not fill the cluster: $(cohort queue)"
# RUNNING means launched; a task handles the warning once it says it trains.
sweep_training() {
  [ "$(grep -l "training" "$WORK"/sweep-"$sweep"_*.out 2>/dev/null | wc -l)" -eq 16 ]
}
wait_until 60 sweep_training || fail "the sweep's tasks did not all start training"
big=$(submit -p high -N 4 --gpus-per-node=8 -o "$WORK/big-%j.out" -- sleep 2)
wait_until 30 state_is "$big" RUNNING || fail "the high-tier job did not start: $(cohort why "$big")"
warned=$(grep -l "preemption warning" "$WORK"/sweep-"$sweep"_*.out 2>/dev/null | wc -l)
[ "$warned" -eq 4 ] || fail "$warned sweep tasks were warned, not the 4 the job needed"
victim=$(grep -l "preemption warning" "$WORK"/sweep-"$sweep"_*.out | head -1)
task=$(basename "$victim" .out); task=${task##*_}
show=$(cohort show job "${sweep}_$task")
grep -q "REQUEUE" <<<"$show" || fail "show job does not list the preemption: $show"
grep -q "checkpoint done" <<<"$show" || fail "show job does not say the checkpoint ended it: $show"
pass "the high-tier job preempted 4 tasks, which were warned and checkpointed"
all_done() { ! cohort queue --noheader -o '%i' | grep -q "^${sweep}_\|^${big}$"; }
wait_until 240 all_done || fail "the sweep did not finish: $(cohort queue)"
for t in $(seq 0 15); do
  state_is "${sweep}_$t" COMPLETED || fail "sweep task $t is $(job_state "${sweep}_$t")"
done
grep -q "resuming from" "$victim" || fail "the victim did not run again: $(cat "$victim")"
grep -q '"attempt": *2' <<<"$(cohort show job "${sweep}_$task" --json)" ||
  fail "the victim's attempt is not 2"
pass "the requeued victims ran again from their checkpoints"

# --- an array with %2: never more than 2 running; tasks see their range.
# Each task runs 1 s so that tasks would overlap if the throttle let them;
# the count of running tasks is sampled until the array has ended (the
# event that ends the check), never for a fixed time.
cat >"$WORK/task.sh" <<'SCRIPT'
#!/bin/sh
echo "$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX" >"$OUTDIR/task-$SLURM_ARRAY_TASK_ID"
sleep 1
SCRIPT
chmod +x "$WORK/task.sh"
array=$(submit --array=0-9%2 -o "$WORK/arr-%A_%a.out" "$WORK/task.sh")
most=0
array_open() { cohort queue --noheader -o '%i' | grep -q "^${array}_"; }
deadline=$((SECONDS + 120))
while array_open && [ "$SECONDS" -lt "$deadline" ]; do
  n=$(cohort queue --noheader -t RUNNING -o '%i' | grep -c "^${array}_" || true)
  [ "$n" -gt "$most" ] && most=$n
  sleep 0.2  # the sampling interval
done
[ "$most" -le 2 ] || fail "the array ran $most tasks at once; %2 allows 2"
[ "$(ls "$WORK"/task-* 2>/dev/null | wc -l)" -eq 10 ] || fail "not every task ran: $(ls "$WORK")"
[ "$(cat "$WORK/task-7")" = "$array 7 10 0 9" ] || fail "task 7 saw: $(cat "$WORK/task-7")"
[ -f "$WORK/arr-${array}_3.out" ] || fail "%A_%a did not name the output arr-${array}_3.out"
pass "array %2 ran 10 tasks, at most $most at once, with the SLURM_ARRAY_* range"

# --- dependencies, holds, requeue
first=$(submit -o /dev/null -- sleep 1)
ok=$(submit -d "afterok:$first" -o /dev/null -- true)
never=$(submit -d "afternotok:$first" -o /dev/null -- true)
killed=$(submit -d "afternotok:$first" --kill-on-invalid-dep=yes -o /dev/null -- true)
wait_until 60 state_is "$ok" COMPLETED || fail "afterok job is $(job_state "$ok")"
never_reason() { cohort show job "$never" --json | grep -q '"reason": *"DependencyNeverSatisfied"'; }
wait_until 30 never_reason || fail "afternotok job: $(cohort show job "$never")"
wait_until 30 state_is "$killed" CANCELLED || fail "--kill-on-invalid-dep job is $(job_state "$killed")"
cohort why "$never" | grep -qi "never" || fail "why does not explain the dependency: $(cohort why "$never")"
cohort cancel "$never"
pass "afterok ran after its dependency; afternotok waits as DependencyNeverSatisfied or is cancelled"

held=$(submit -H -o /dev/null -- true)
# A held job's reason is JobHeldUser from its submission, so `considered`
# proves nothing here. A job submitted after it starts only in a pass that
# came after the held job's submission, and that pass would have started
# the older held job first had the hold not kept it.
after=$(submit -o /dev/null -- true)
wait_until 30 finished "$after" || fail "job $after, submitted after the held one, did not run"
state_is "$held" PENDING || fail "a held job is $(job_state "$held")"
cohort show job "$held" --json | grep -q '"reason": *"JobHeldUser"' || fail "held job's reason"
cohort release "$held" || fail "release refused"
wait_until 30 state_is "$held" COMPLETED || fail "released job is $(job_state "$held")"
pass "hold and release"

long=$(submit -o /dev/null -- sleep 60)
wait_until 30 state_is "$long" RUNNING || fail "job $long did not start"
cohort requeue "$long" || fail "requeue refused"
requeued() { cohort show job "$long" --json | grep -q '"attempt": *2'; }
wait_until 30 requeued || fail "requeued job: $(cohort show job "$long")"
cohort cancel "$long"
pass "requeue runs the job again as attempt 2"

# --- reports
cohort priority >/dev/null || fail "cohort priority failed"
shares=$(cohort shares) || fail "cohort shares failed"
grep -q "research\|$(id -un)" <<<"$shares" || fail "shares shows no usage: $shares"
pass "priority and shares answer"
finish_test
