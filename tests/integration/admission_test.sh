#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The admission checks cohort.conf chooses, through the real CLI: on the demo
# cluster plus a partition "strict" without DefaultTime, with
# admission/require-time-limit chosen, a job without --time is refused
# there (by submit and by --test-only) with the fix in the message, and runs
# once it says --time on the command line or in #SBATCH; in gpu, whose
# DefaultTime is its time limit, it needs none.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/cluster.conf" <<CONF
Include=$ROOT/etc/demo/cluster.conf
PartitionName=strict Nodes=ALL MaxTime=1:00:00
AdmissionPlugins=admission/limits,admission/require-time-limit
CONF
start_cluster "$WORK/cluster.conf"

hint="has no time limit and partition strict has no DefaultTime; add --time=HH:MM:SS (#SBATCH --time)"
for how in "" "--test-only"; do
  if out=$(cohort submit -p strict $how -o /dev/null -- true 2>&1); then
    fail "submit -p strict${how:+ $how} without --time was accepted: $out"
  elif ! grep -qF -- "$hint" <<<"$out"; then
    fail "submit -p strict${how:+ $how} without --time was refused without the fix: $out"
  else
    pass "submit -p strict${how:+ $how} without --time refused: $(tail -1 <<<"$out")"
  fi
done
[ -z "$(cohort queue --noheader -o '%i')" ] || fail "a refused job is queued: $(cohort queue)"

timed=$(submit -p strict --time=1:00 -o /dev/null -- true)
[ -n "$timed" ] || fail "submit -p strict --time=1:00 was refused"
cat >"$WORK/timed.sh" <<'SCRIPT'
#!/bin/sh
#SBATCH -p strict
#SBATCH --time=0:30
true
SCRIPT
scripted=$(submit -o /dev/null "$WORK/timed.sh")
[ -n "$scripted" ] || fail "a script with #SBATCH --time was refused"
defaulted=$(submit -o /dev/null -- true)
[ -n "$defaulted" ] || fail "submit to gpu (DefaultTime=10) without --time was refused"
for id in $timed $scripted $defaulted; do
  wait_until 60 finished "$id" || fail "job $id did not end: $(cohort show job "$id")"
  state_is "$id" COMPLETED || fail "job $id is $(job_state "$id")"
done
pass "jobs with --time, with #SBATCH --time and in a partition with DefaultTime ran"
finish_test
