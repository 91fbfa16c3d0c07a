#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --signal: the ranks of a job's steps get a warning signal before the time
# limit, once, and the job then ends TIMEOUT; B: warns only the batch
# script; a rank that does not handle the signal ends the job as TIMEOUT
# too; bad values are refused.
source "$(dirname "$0")/lib.sh"
start_cluster

# The batch script and each rank of its step trap USR1 and append a line;
# bash runs the trap between sleeps (0.2 s: how soon a warning is written).
# Without B: the warning reaches the step's ranks, as Slurm's --signal does;
# with B: the batch script alone. The counts are checked once the jobs have
# ended, so a second warning cannot come after the check. The directives set
# the limit (12 s) and the warning (6 s before it).
export PATH="$BIN/cli:$PATH" WARNED="$WORK"  # the scripts' cohort and folder
cat >"$WORK/warned.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -t 0:12
#SBATCH --signal=USR1@6
trap 'echo "warned batch=$SLURM_PROCID" >>"$WARNED/warned-$COHORT_JOB_ID"' USR1
cohort run -- bash -c 'trap "echo warned rank=\$RANK >>$WARNED/warned-$COHORT_JOB_ID" USR1
  while true; do sleep 0.2; done' &
while true; do sleep 0.2; done
SCRIPT
chmod +x "$WORK/warned.sh"

all=$(submit -N 2 --ntasks-per-node 2 -o "$WORK/all-%j.out" "$WORK/warned.sh")
batch=$(submit -N 2 --ntasks-per-node 2 --signal=B:USR1@6 -o "$WORK/batch-%j.out" "$WORK/warned.sh")
untrapped=$(submit -N 1 -t 0:12 --signal=SIGUSR1@6 -o "$WORK/untrapped-%j.out" -- sleep 300)
none=$(submit -N 1 -t 0:12 --signal=none -o "$WORK/none-%j.out" "$WORK/warned.sh")
for id in "$all" "$batch" "$untrapped" "$none"; do
  [ -n "$id" ] || { fail "a submission was refused"; finish_test; }
done

lines() { cat "$WORK/warned-$1" 2>/dev/null | wc -l; }
four_lines() { [ "$(lines "$all")" -ge 4 ]; }
wait_until 60 four_lines || fail "job $all: $(lines "$all") of 4 ranks were warned"
# The warning comes 6 s before the limit: the job still runs when it lands.
state_is "$all" RUNNING || fail "job $all was $(job_state "$all") when its ranks were warned"
show=$(cohort show job "$all")
grep -q "Signal=USR1@6" <<<"$show" || fail "show job does not show Signal=USR1@6: $show"
grep -q "ReasonDetail=sent USR1 to every rank 6 s before the time limit" <<<"$show" ||
  fail "show job does not say the warning was sent: $show"
wait_until 60 finished "$all" || fail "job $all did not end"
[ "$(job_state "$all")" = TIMEOUT ] || fail "job $all is $(job_state "$all"), not TIMEOUT"
[ "$(lines "$all")" -eq 4 ] || fail "job $all: $(lines "$all") warnings, not one per rank"
for rank in 0 1 2 3; do
  grep -qx "warned rank=$rank" "$WORK/warned-$all" || fail "job $all: rank $rank was not warned"
done
pass "every rank of the step was warned once before the time limit, then the job timed out"

wait_until 60 finished "$batch" || fail "job $batch did not end"
[ "$(job_state "$batch")" = TIMEOUT ] || fail "job $batch is $(job_state "$batch"), not TIMEOUT"
[ "$(cat "$WORK/warned-$batch" 2>/dev/null)" = "warned batch=0" ] ||
  fail "job $batch (B:): warned $(cat "$WORK/warned-$batch" 2>/dev/null | tr '\n' ' '), not the batch script alone"
pass "B: warned the batch script alone"

wait_until 60 finished "$untrapped" || fail "job $untrapped did not end"
[ "$(job_state "$untrapped")" = TIMEOUT ] ||
  fail "job $untrapped is $(job_state "$untrapped"), not TIMEOUT"
show=$(cohort show job "$untrapped" --json)
grep -q '"exit_signal": *10' <<<"$show" || fail "job $untrapped: not ended by USR1: $show"
grep -q "ended on the warning signal USR1" <<<"$show" || fail "job $untrapped: reason: $show"
pass "a rank that does not handle the warning ends the job as TIMEOUT"

wait_until 60 finished "$none" || fail "job $none did not end"
[ "$(job_state "$none")" = TIMEOUT ] || fail "job $none is $(job_state "$none"), not TIMEOUT"
[ ! -e "$WORK/warned-$none" ] || fail "job $none (--signal=none) was warned"
grep -q "Signal=none" <<<"$(cohort show job "$none")" || fail "job $none does not show Signal=none"
pass "--signal=none sends no warning"

# Without --signal: USR1 90 s before the limit (not reached in this test).
id=$(submit -N 1 -t 5:00 -- true)
wait_until 30 finished "$id" || fail "job $id did not end"
show=$(cohort show job "$id" --json)
grep -q '"warn_signal": *"USR1"' <<<"$show" && grep -q '"warn_seconds": *90' <<<"$show" ||
  fail "the default warning is not USR1@90: $show"
pass "the default warning is USR1@90"

# The warning is recorded: a controller restarted after it does not send it
# again (the job would get it at once: it is past due).
id=$(submit -N 1 --ntasks-per-node 2 -t 0:20 --signal=USR1@14 -o "$WORK/restart-%j.out" \
  "$WORK/warned.sh")
two_lines() { [ "$(lines "$id")" -ge 2 ]; }
wait_until 60 two_lines || fail "job $id: $(lines "$id") of 2 ranks were warned"
kill "$CONTROLLER_PID"; wait "$CONTROLLER_PID" 2>/dev/null
crash_controller 2>/dev/null  # forgets the stopped controller's pid
restart_controller
wait_until 60 finished "$id" || fail "job $id did not end after the controller's restart"
[ "$(job_state "$id")" = TIMEOUT ] || fail "job $id is $(job_state "$id"), not TIMEOUT"
[ "$(lines "$id")" -eq 2 ] || fail "job $id: warned again after a restart ($(lines "$id") lines)"
pass "a restarted controller does not warn again"

out=$(cohort submit --signal=FOO -- true 2>&1) && fail "--signal=FOO accepted"
grep -q -- '--signal: "FOO" is not a signal; write USR1, SIGUSR1 or 10' <<<"$out" ||
  fail "--signal=FOO message: $out"
out=$(cohort submit --signal=USR1@soon -- true 2>&1) && fail "--signal=USR1@soon accepted"
grep -q -- '--signal: "@soon" is not a warning time' <<<"$out" || fail "@soon message: $out"
pass "bad --signal values are refused"
finish_test
