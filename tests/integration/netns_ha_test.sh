#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# High availability on separate hosts (scripts/netns-cluster.sh, STANDBY=1):
# PostgreSQL on its own host (db), the active controller (ctl) and a
# standby (ctl2) on theirs, two nodes. With a job running, the active
# controller's cable is pulled, cutting it from PostgreSQL and from the
# agents: it fences itself (it cannot renew its lease and stops acting),
# the standby takes over within ControllerTimeout, the agents follow it,
# and the job runs on untouched: never fenced, never restarted, one live
# copy of each rank. Plugged back in, the old controller waits as the
# standby (before, it exited: the database it could not reach made its
# restart as a standby fail), and takes over in turn when the new active
# one is cut off.
source "$(dirname "$0")/lib.sh"

use_netns_cluster
# An agent notices a vanished controller within its keepalive (10 s, 5 s for
# the answer) and dials the next; NodeTimeout must be longer than that plus
# ControllerTimeout, or the agents fence their ranks before they reach the
# new active controller (docs/operations.md, "High availability").
STANDBY=1 CONTROLLER_TIMEOUT=4 NODE_TIMEOUT=30 netns up "$NET" 2 ||
  { fail "the cluster did not come up"; exit 1; }
cohort() { netns run "$NET" login "$BIN/cli/cohort" "$@"; }
log_of() { echo "$NET/hosts/$1/controller.log"; }
count() { grep -c "$1" "$(log_of "$2")" || true; }
# ranks ID: the job's live ranks over both nodes' process tables.
ranks() {
  local host pid total=0
  for host in node01 node02; do
    for pid in $(netns pids "$NET" "$host"); do
      [ "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" = "sleep 300 " ] || continue
      tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "SLURM_JOB_ID=$1" &&
        total=$((total + 1))
    done
  done
  echo "$total"
}

id=$(submit -N 2 -o "$NET/ha-%j.out" -- \
  sh -c 'echo "restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"; exec sleep 300')
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start: $(cohort show job "$id")"
wait_until 10 test "$(ranks "$id")" = 2 || fail "job $id runs $(ranks "$id") ranks, not 2"

# 1. The active controller cut off: from PostgreSQL and from the agents.
failed_before=$FAILURES
start=$(date +%s%N)
netns cut "$NET" ctl
took_over() { [ "$(count leadership_acquired ctl2)" -ge 1 ]; }
wait_until 30 took_over || fail "ctl2 did not take over: $(tail -5 "$(log_of ctl2)")"
took=$((($(date +%s%N) - start) / 1000000))
grep -q "leadership_lost" "$(log_of ctl)" || fail "ctl did not give up its lease: $(tail -5 "$(log_of ctl)")"
# (The login host's CLI dials ctl first, whose packets go nowhere now: each
# command gives it a second, kFailoverConnect, before it asks ctl2.)
wait_until 60 state_is "$id" RUNNING || fail "job $id is $(job_state "$id") under ctl2"
# Every agent back, with its node, under ctl2.
registered() {
  [ "$(cohort nodes -N --json | python3 -c 'import json,sys; print(sorted({n["state"] for n in json.load(sys.stdin)["nodes"]}))')" = "['ALLOCATED']" ]
}
wait_until 40 registered || fail "the nodes are not both ALLOCATED under ctl2: $(cohort nodes -N)"
[ "$(ranks "$id")" = 2 ] || fail "job $id runs $(ranks "$id") ranks after the takeover, not 2"
[ "$(grep -c '^restart 0 on' "$NET/ha-$id.out")" = 2 ] && ! grep -q '^restart 1' "$NET/ha-$id.out" ||
  fail "job $id started again: $(cat "$NET/ha-$id.out")"
for host in node01 node02; do
  grep -q agent_fenced "$NET/hosts/$host/agent.log" && fail "$host fenced its ranks during the takeover"
done
[ "$FAILURES" = "$failed_before" ] && pass "ctl cut from PostgreSQL and the agents: it gave up its lease, ctl2 took over in ${took} ms, job $id ran on untouched"

# 2. Plugged back in, the old controller is the standby; cut the new
# active one and it takes over again.
failed_before=$FAILURES
netns heal "$NET" ctl
standby_again() { [ "$(count controller_standby ctl)" -ge 1 ]; }
wait_until 30 standby_again || fail "ctl did not come back as a standby: $(tail -5 "$(log_of ctl)")"
netns cut "$NET" ctl2
back() { [ "$(count leadership_acquired ctl)" -ge 2 ]; }
wait_until 30 back || fail "ctl did not take over again: $(tail -5 "$(log_of ctl)")"
wait_until 60 state_is "$id" RUNNING || fail "job $id is $(job_state "$id") under ctl again"
wait_until 40 registered || fail "the nodes are not both ALLOCATED under ctl again: $(cohort nodes -N)"
[ "$(ranks "$id")" = 2 ] && ! grep -q '^restart 1' "$NET/ha-$id.out" ||
  fail "job $id did not run on through the second takeover: $(cat "$NET/ha-$id.out")"
netns heal "$NET" ctl2
cohort cancel "$id"
wait_until 30 finished "$id" || fail "job $id did not end when cancelled"
[ "$FAILURES" = "$failed_before" ] && pass "ctl back as the standby, and active again when ctl2 was cut off; job $id never restarted"

finish_test
