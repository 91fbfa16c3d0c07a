#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A controller killed with -9 and started again keeps every job: running
# gangs go on and end with their real exit codes, exits that happened while
# it was away are learnt from the agents, pending jobs, drains, a node set
# DOWN and a partition's state survive, and finished jobs are in the
# history.
source "$(dirname "$0")/lib.sh"
start_cluster

# Each job runs until the test lets it go (a file appears), so that what
# happens while the controller is away does not hang on timing.
# (The 0.1 s sleep is the ranks' polling interval.)
await() { echo "while [ ! -e $WORK/go-$1 ]; do sleep 0.1; done"; }
long=$(submit -N 4 -o "$WORK/long-%j.out" -- sh -c "$(await long); echo done-\$RANK")
fails=$(submit -N 2 -o "$WORK/fails-%j.out" -- \
  sh -c "$(await fails); [ \$RANK = 1 ] && exit 3; exit 0")
quick=$(submit -N 1 -- sh -c "$(await quick)")
for id in "$long" "$fails" "$quick"; do
  wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
done
cohort drain node16 --reason "fan replaced" >/dev/null || fail "drain refused"
cohort down node15 --reason "PSU swap" >/dev/null || fail "down refused"
"$BIN/cli/slurm/scontrol" update PartitionName=high State=DRAIN || fail "partition update refused"
# Held across the restart: its environment is then only in the database,
# read back (off the state thread) when it launches.
held=$(RESTART_MARK="kept-$$" submit -H -N 1 -o "$WORK/held-%j.out" -- sh -c 'echo "mark=$RESTART_MARK"')
[ -n "$held" ] || fail "held job not accepted"
blocked=$(submit -N 16 -- true)
[ -n "$blocked" ] || fail "16-node job not accepted"

crash_controller
touch "$WORK/go-quick"  # job $quick ends while no controller is there to hear it
# Its cohort-stepd records the ranks' end in the spool before the agent
# hears of it: the controller starts again only once the exit happened.
quick_ended() { grep -q '^done$' "$WORK"/spool/*/job-"$quick".*/events; }
wait_until 30 quick_ended || fail "job $quick's rank did not end while the controller was away"
restart_controller
# Every agent registered again: no node unknown, and only node15 down (an
# operator set it so before the crash).
agents_back() {
  [ "$(cohort nodes -N --json | python3 -c 'import json, sys
nodes = json.load(sys.stdin)["nodes"]
print(sorted(n["name"] for n in nodes if n["state"] in ("UNKNOWN", "DOWN")))' 2>/dev/null)" = \
    "['node15']" ]
}
wait_until 30 agents_back || fail "agents did not come back: $(cohort nodes -N)"

[ "$(job_state "$long")" = RUNNING ] || fail "job $long is $(job_state "$long") after restart, not RUNNING"
[ "$(job_state "$blocked")" = PENDING ] || fail "job $blocked is $(job_state "$blocked"), not PENDING"
queue=$(cohort queue --all) || fail "queue after restart failed"
grep -q "$long" <<<"$queue" || fail "job $long missing from the queue after restart: $queue"
pass "after kill -9 and restart the queue still shows the running job"

wait_until 30 finished "$quick" || fail "job $quick (ended while the controller was away) not finished"
touch "$WORK/go-long" "$WORK/go-fails"
[ "$(job_state "$quick")" = COMPLETED ] || fail "job $quick is $(job_state "$quick"), not COMPLETED"
wait_until 60 finished "$long" || fail "job $long did not finish"
[ "$(job_state "$long")" = COMPLETED ] || fail "job $long is $(job_state "$long"), not COMPLETED"
[ "$(grep -c '^done-' "$WORK/long-$long.out")" = 4 ] || fail "job $long: not 4 ranks' output"
wait_until 60 finished "$fails" || fail "job $fails did not finish"
[ "$(job_state "$fails")" = FAILED ] || fail "job $fails is $(job_state "$fails"), not FAILED"
grep -q '"exit_code": *3' <<<"$(cohort show job "$fails" --json)" || fail "job $fails: exit code not 3"
pass "running gangs survived the restart and ended with their real exit codes"

history=$(cohort history -a -p -j "$long,$fails,$quick") || fail "history failed"
grep -q "^$long|.*|COMPLETED|0:0|" <<<"$history" ||
  fail "history does not show job $long COMPLETED 0:0: $history"
grep -q "^$fails|.*|FAILED|3:0|" <<<"$history" || fail "history does not show job $fails FAILED 3:0: $history"
pass "cohort history shows the jobs that lived through the restart"

show=$(cohort show node node16) || fail "show node16"
grep -q "fan replaced" <<<"$show" || fail "the drain reason did not survive: $show"
pass "a drain and its reason survived the restart"

show=$(cohort show node node15) || fail "show node15"
grep -q "State=DOWN" <<<"$show" && grep -q "Reason=PSU swap \[root@" <<<"$show" ||
  fail "node15 set DOWN did not stay so: $show"
show=$("$BIN/cli/slurm/scontrol" show partition high) || fail "show partition high"
grep -q "State=DRAIN" <<<"$show" || fail "partition high's DRAIN did not survive: $show"
"$BIN/cli/slurm/scontrol" update PartitionName=high State=UP || fail "partition back UP refused"
cohort resume node15 >/dev/null || fail "resume node15 refused"
pass "a node set DOWN and a partition's DRAIN survived the restart"

next=$(submit -N 1 -- true)
[ "$next" -gt "$blocked" ] || fail "id $next after restart is not above $blocked: an id was reused"
cohort cancel "$blocked" >/dev/null || fail "cancel $blocked"
pass "ids continue after the restart"

cohort release "$held" >/dev/null || fail "release $held"
wait_until 30 finished "$held" || fail "job $held (held across the restart) did not finish"
[ "$(job_state "$held")" = COMPLETED ] || fail "job $held is $(job_state "$held"), not COMPLETED"
grep -qx "mark=kept-$$" "$WORK/held-$held.out" ||
  fail "job $held did not run with the environment it was submitted with: $(cat "$WORK/held-$held.out")"
pass "a job held across the restart launches with the environment it was submitted with"

# A clean stop (SIGTERM) loses nothing either.
kill "$CONTROLLER_PID"; wait "$CONTROLLER_PID" 2>/dev/null
crash_controller 2>/dev/null
restart_controller
wait_until 30 finished "$next" || fail "job $next lost across a clean stop"
out=$("$BIN/daemons/controller/cohort-controller" -c "$WORK/cohort.conf" --check-state) ||
  fail "--check-state failed: $out"
grep -q "ok" <<<"$out" || fail "--check-state: $out"
pass "--check-state: $(head -1 <<<"$out")"
finish_test
