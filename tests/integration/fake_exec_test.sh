#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An emulating agent with --fake-exec runs multi-node jobs through the real
# controller and CLI without starting a process: they COMPLETE after the
# runtime the job gives, `false` FAILS, and a cancelled one ends CANCELLED
# (its fake ranks end by SIGTERM).
source "$(dirname "$0")/lib.sh"

# lib.sh's agent, with --fake-exec.
start_agent() {
  local nodes count
  nodes=$("$BIN/cli/cohort" config check -c "$WORK/cohort.conf" 2>/dev/null |
    sed -n 's/^nodes *\([0-9]*\) (\(.*\)),.*/\2/p')
  count=$("$BIN/cli/cohort" hostlist expand "$nodes" | wc -l)
  mkdir -p "$WORK/spool"
  "$BIN/daemons/agent/cohort-agent" -c "$WORK/cohort.conf" \
    --controller "127.0.0.1:$(cat "$WORK/port")" --emulate "$count" --nodes "$nodes" \
    --spool "$WORK/spool" --fake-exec >>"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
}
start_cluster

# Three gangs at once: 4 nodes for `sleep 1` (faked: the agent reads the
# runtime from the argument and starts nothing), 8 nodes whose runtime comes
# from COHORT_FAKE_RUNTIME, 2 nodes x 2 ranks that exit at once.
a=$(submit -N 4 --gpus-per-node 8 -o /dev/null -- sleep 1)
b=$(COHORT_FAKE_RUNTIME=0.5 submit -N 8 --gpus-per-node 2 -o /dev/null -- /opt/train --epochs 3)
c=$(submit -N 2 --ntasks-per-node 2 -o /dev/null -- true)
d=$(submit -N 3 -o /dev/null -- false)
for id in "$a" "$b" "$c" "$d"; do [ -n "$id" ] || { fail "a submit printed no job id"; finish_test; }; done
for id in "$a" "$b" "$c" "$d"; do wait_until 60 finished "$id" || fail "job $id did not finish"; done
for id in "$a" "$b" "$c"; do
  [ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id"), not COMPLETED"
done
[ "$(job_state "$d")" = FAILED ] || fail "job $d (false) is $(job_state "$d"), not FAILED"
grep -q '"exit_code": *1' <<<"$(cohort show job "$d" --json)" ||
  fail "job $d's exit code: $(cohort show job "$d" --json | grep exit)"
pass "fake gangs of 4, 8 and 2 nodes completed; false failed with exit code 1"

# A long fake job runs until cancelled; its ranks end by SIGTERM.
e=$(submit -N 16 -o /dev/null -- sleep 1d)
wait_until 30 state_is "$e" RUNNING || fail "job $e did not start"
ranks_listed() { [ "$(cohort show job "$e" --ranks | grep -c '^[0-9]')" = 16 ]; }
wait_until 20 ranks_listed || fail "show job --ranks: $(cohort show job "$e" --ranks)"
cohort cancel "$e" || fail "cancel $e"
wait_until 30 finished "$e" || fail "job $e did not end after cancel"
[ "$(job_state "$e")" = CANCELLED ] || fail "job $e is $(job_state "$e"), not CANCELLED"
pass "a 16-node fake job ran until cancelled and ended CANCELLED"

# A runtime the agent cannot read fails the launch with the reason.
f=$(COHORT_FAKE_RUNTIME=soon submit -N 1 -o /dev/null -- true)
wait_until 30 finished "$f" || fail "job $f did not finish"
[ "$(job_state "$f")" = FAILED ] || fail "job $f is $(job_state "$f"), not FAILED"
grep -q "COHORT_FAKE_RUNTIME" <<<"$(cohort show job "$f")" ||
  fail "job $f does not say why: $(cohort show job "$f")"
pass "an unreadable COHORT_FAKE_RUNTIME fails the launch and says why"

# No process, no spool folder: fake execution forked nothing.
children=$(ps -o pid= --ppid "$AGENT_PID" | wc -l)
[ "$children" = 0 ] || fail "the fake-exec agent has $children child processes"
[ -z "$(find "$WORK/spool" -mindepth 1 -type d)" ] || fail "spool folders: $(find "$WORK/spool" -mindepth 1 -type d | head)"
pass "no process started and no launch folder written"
finish_test
