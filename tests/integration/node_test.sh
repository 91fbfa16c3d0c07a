#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drain keeps jobs off a node until it is resumed; a killed agent's nodes go
# DOWN within NodeTimeout and their jobs end NODE_FAIL.
source "$(dirname "$0")/lib.sh"
start_cluster

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
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
kill -9 "$AGENT_PID"
wait_until 60 state_is "$id" NODE_FAIL || fail "job $id is $(job_state "$id"), not NODE_FAIL"
grep -q DOWN <<<"$(node_states)" || fail "no node is DOWN after the agent died: $(cohort nodes)"
pass "a killed agent gives NODE_FAIL"
finish_test
