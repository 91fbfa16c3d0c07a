#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drain keeps jobs off a node until it is resumed; a killed agent's nodes go
# DOWN within NodeTimeout and their jobs end NODE_FAIL, or with --requeue go
# back to the queue, under a restart cap.
source "$(dirname "$0")/lib.sh"
sacct() { "$BIN/cli/slurm/sacct" "$@"; }
EXTRA_CONF="RequeueBackoff=2" start_cluster

cohort drain node01 --reason "bad dimm" || fail "drain refused"
show=$(cohort show node node01)
grep -q DRAINED <<<"$show" || fail "node01 not drained: $show"
id=$(submit -N 16 -- true)
wait_until 30 considered "$id" || fail "no scheduling pass considered job $id: $(cohort show job "$id")"
[ "$(job_state "$id")" = PENDING ] || fail "16-node job ran with node01 drained"
cohort resume node01 || fail "resume refused"
wait_until 30 finished "$id" || fail "job $id did not run after resume"
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id")"
pass "drain and resume"

id=$(submit -N 2 -- sh -c "echo \$\$ >> $WORK/rank-pids; exec sleep 120")
# With --max-restarts=1 (which implies --requeue), a node loss sends the job
# back to the queue once; its second attempt sees SLURM_RESTART_COUNT.
again=$(submit -N 2 --max-restarts=1 -o "$WORK/again-%j.out" -- \
  sh -c 'echo "restart=${SLURM_RESTART_COUNT:-none}"; exec sleep 120')
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
wait_until 30 state_is "$again" RUNNING || fail "job $again did not start"
kill -9 "$AGENT_PID"
wait_until 60 state_is "$id" NODE_FAIL || fail "job $id is $(job_state "$id"), not NODE_FAIL"
grep -q DOWN <<<"$(node_states)" || fail "no node is DOWN after the agent died: $(cohort nodes)"
pass "a killed agent gives NODE_FAIL"

state_is "$again" PENDING || fail "job $again is $(job_state "$again"), not requeued"
show=$(cohort show job "$again")
grep -q "Restarts=1" <<<"$show" || fail "job $again shows no Restarts=1: $show"
grep -q "Attempt=1 State=NODE_FAIL .*Reason=node .* was lost" <<<"$show" ||
  fail "job $again does not list its first attempt: $show"
start_agent
wait_until 30 all_nodes_up || fail "the nodes did not come back: $(cohort nodes)"
wait_until 60 state_is "$again" RUNNING || fail "job $again did not run again: $(cohort show job "$again")"
has_restart() { grep -q "restart=1" "$WORK/again-$again.out"; }
wait_until 30 has_restart || fail "no SLURM_RESTART_COUNT=1 in: $(cat "$WORK/again-$again.out")"
grep -q "restart=none" "$WORK/again-$again.out" || fail "the first attempt had SLURM_RESTART_COUNT"
# sacct -D lists the attempt the node loss ended, then the running one.
acct=$(sacct -D -X -n -P -j "$again" --format=JobID,State)
[ "$acct" = "$again|NODE_FAIL
$again|RUNNING" ] || fail "sacct -D -X for job $again: $acct"
grep -q "^$again|NODE_FAIL" <<<"$(sacct -X -n -P -j "$again" --format=JobID,State)" &&
  fail "sacct without -D lists the ended attempt"
pass "a requeued job waits out its back-off, runs again with SLURM_RESTART_COUNT=1, sacct -D lists both"

kill -9 "$AGENT_PID"
wait_until 60 state_is "$again" NODE_FAIL || fail "job $again is $(job_state "$again") past its cap"
grep -q "its cap (--max-restarts=1)" <<<"$(cohort show job "$again")" ||
  fail "job $again does not say its cap ended it: $(cohort show job "$again")"
pass "a second node loss passes --max-restarts=1 and the job ends NODE_FAIL, saying why"
finish_test
