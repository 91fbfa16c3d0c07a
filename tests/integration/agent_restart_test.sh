#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ranks outlive their agent: with two 2-node jobs running, the agent is
# killed (kill -9) and a new one is started on the same spool. It adopts the
# ranks' cohort-stepds, and the jobs end as their ranks say: one COMPLETED,
# one FAILED with exit code 3. Then two jobs whose ranks end while no agent
# runs: the next agent reports their exits from the spool. No rank is left
# running afterwards.
source "$(dirname "$0")/lib.sh"
start_cluster

# Each rank records its pid (lib.sh's cleanup kills what is left), and its
# start in its own file, so the test knows when every rank runs.
# They run until the test lets them go (a file appears), so that the agent's
# kill and restart never race their end (the 0.1 s sleep is their polling
# interval).
rank_script() {
  echo "echo \$\$ >> $WORK/rank-pids; touch $WORK/ranks/\$SLURM_JOB_ID-\$RANK;" \
    "while [ ! -e $WORK/go ]; do sleep 0.1; done; exit $1"
}
# ends_as ID STATE [EXIT_CODE]: waits for the job to end, then checks how.
ends_as() {
  wait_until 60 finished "$1" || { fail "job $1 did not finish"; return; }
  [ "$(job_state "$1")" = "$2" ] || fail "job $1 is $(job_state "$1"), not $2"
  [ -z "${3:-}" ] || grep -Eq "\"exit_code\": *$3([^0-9]|$)" <<<"$(cohort show job "$1" --json)" ||
    fail "exit code of job $1 is not $3: $(cohort show job "$1" --json)"
}
mkdir -p "$WORK/ranks"
ok=$(submit -N 2 -o "$WORK/ok-%j-%t.out" -- sh -c "$(rank_script 0)")
bad=$(submit -N 2 -o "$WORK/bad-%j-%t.out" -- sh -c "$(rank_script 3)")
[ -n "$ok" ] && [ -n "$bad" ] || { fail "submit printed no job id"; finish_test; }
all_ranks_run() { [ "$(ls "$WORK/ranks" | wc -l)" -eq 4 ]; }
wait_until 30 all_ranks_run || fail "the ranks did not all start: $(ls "$WORK/ranks")"
state_is "$ok" RUNNING || fail "job $ok is $(job_state "$ok"), not RUNNING"
state_is "$bad" RUNNING || fail "job $bad is $(job_state "$bad"), not RUNNING"

old_agent=$AGENT_PID
kill -9 "$old_agent"
wait "$old_agent" 2>/dev/null
# The ranks did not go with it.
alive=0
while read -r pid; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done <"$WORK/rank-pids"
[ "$alive" -eq 4 ] || fail "$alive of 4 ranks survived the agent's kill -9"
start_agent
pass "ranks survived kill -9 of the agent ($alive of 4 alive)"
adopted() { grep -q "launch_adopted job=$ok " "$WORK/agent.log"; }
wait_until 30 adopted || fail "the new agent did not adopt job $ok"
touch "$WORK/go"

ends_as "$ok" COMPLETED
ends_as "$bad" FAILED 3
pass "the restarted agent reported the exits: $ok COMPLETED, $bad FAILED with exit code 3"

# Ranks that end while no agent runs: the next agent reads their exits from
# the spool. They run until the test lets them go after the agent's kill,
# so that none ends before it.
rank_script() {
  echo "echo \$\$ >> $WORK/rank-pids; touch $WORK/ranks/\$SLURM_JOB_ID-\$RANK;" \
    "while [ ! -e $WORK/go2 ]; do sleep 0.1; done; exit $1"
}
ok2=$(submit -N 2 -o "$WORK/ok-%j-%t.out" -- sh -c "$(rank_script 0)")
bad2=$(submit -N 2 -o "$WORK/bad-%j-%t.out" -- sh -c "$(rank_script 5)")
all_ranks_run() { [ "$(ls "$WORK/ranks" | wc -l)" -eq 8 ]; }
wait_until 30 all_ranks_run || fail "the ranks did not all start: $(ls "$WORK/ranks")"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
touch "$WORK/go2"
launches_done() {
  [ "$(cat "$WORK"/spool/*/job-"$ok2".*/events "$WORK"/spool/*/job-"$bad2".*/events |
    grep -c '^done$')" -eq 4 ]
}
wait_until 30 launches_done || fail "the ranks of jobs $ok2 and $bad2 did not end"
start_agent
ends_as "$ok2" COMPLETED
ends_as "$bad2" FAILED 5
pass "exits while no agent ran were reported: $ok2 COMPLETED, $bad2 FAILED with exit code 5"

# Every rank ran once (none was started again) and none is left, nor any
# cohort-stepd of this spool.
[ "$(wc -l <"$WORK/rank-pids")" -eq 8 ] || fail "ranks started $(wc -l <"$WORK/rank-pids") times, not 8"
ranks_gone() {
  local pid
  while read -r pid; do
    # A zombie still answers kill -0; it no longer runs.
    [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && continue
    kill -0 "$pid" 2>/dev/null && return 1
  done <"$WORK/rank-pids"
  return 0
}
wait_until 30 ranks_gone || fail "ranks still running: $(cat "$WORK/rank-pids" | xargs ps -o pid=,args= -p)"
stepds_gone() { ! ps -eo args= | grep -F "cohort-stepd $WORK/spool/" | grep -vq grep; }
wait_until 30 stepds_gone || fail "stepds still running: $(ps -eo pid=,args= | grep -F "cohort-stepd $WORK/")"
pass "no rank and no cohort-stepd is left running"
finish_test
