#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A failing rank stops the whole gang and the job fails with its exit code;
# a cancelled job stops; a program that cannot start fails the job.
source "$(dirname "$0")/lib.sh"
start_cluster

# The `sleep 300` ranks run until they are stopped; the checks wait for the
# job to end.
id=$(submit -N 2 --ntasks-per-node 2 -o "$WORK/fail-%j.out" -- \
  sh -c 'if [ "$RANK" = 3 ]; then exit 7; fi; sleep 300')
wait_until 60 finished "$id" || fail "job $id was not stopped"
[ "$(job_state "$id")" = FAILED ] || fail "job $id is $(job_state "$id"), not FAILED"
show=$(cohort show job "$id" --json)
grep -q '"exit_code": *7' <<<"$show" || fail "exit code is not 7: $show"
pass "a failing rank stopped the gang"

id=$(submit -N 2 -- sleep 300)
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
cohort cancel "$id" || fail "cancel refused"
wait_until 30 finished "$id" || fail "cancelled job $id did not stop"
[ "$(job_state "$id")" = CANCELLED ] || fail "job $id is $(job_state "$id"), not CANCELLED"
pass "cancel stopped a running job"

id=$(submit -N 2 -- /nonexistent/program)
wait_until 30 finished "$id" || fail "job $id with a missing program did not end"
[ "$(job_state "$id")" = FAILED ] || fail "job $id is $(job_state "$id"), not FAILED"
show=$(cohort show job "$id")
grep -q "launch failed on node" <<<"$show" || fail "no launch failure reason: $show"
pass "a launch failure fails the whole job with the node's reason"

# Bad input is refused with the field named, and the controller keeps serving.
out=$(cohort submit -N 0 -- true 2>&1) && fail "-N 0 accepted"
grep -qi "nodes" <<<"$out" || fail "-N 0 message does not name the field: $out"
out=$(cohort submit -N 1 -p nosuch -- true 2>&1) && fail "unknown partition accepted"
grep -q "nosuch" <<<"$out" || fail "unknown partition message: $out"
out=$(cohort submit -N 17 -- true 2>&1) && fail "17 nodes accepted on 16"
grep -q "never run" <<<"$out" || fail "too many nodes message: $out"
out=$(cohort submit -t 1:2:3:4 -- true 2>&1) && fail "malformed time accepted"
cohort queue >/dev/null || fail "controller stopped answering after bad input"
pass "bad input refused, controller still up"
finish_test
