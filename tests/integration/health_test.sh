#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# HealthCheckProgram: a node whose check fails is drained with the check's
# output as the reason and takes no new job; it is resumed once the check
# passes again; a node an operator drained stays drained whatever its check
# says. The check here fails for the nodes a file names. Prolog= and
# Epilog= run on each node of a job before it starts there and after it
# left; a failed prolog drains the node and requeues the job, a failed
# epilog drains the node and leaves the job as it ended.
source "$(dirname "$0")/lib.sh"

cat >"$WORK/health.sh" <<'CHECK'
#!/bin/sh
if [ -e "$(dirname "$0")/sick-$COHORT_NODENAME" ]; then
  echo "/scratch is 97% full"
  exit 1
fi
exit 0
CHECK
chmod 755 "$WORK/health.sh"
for script in prolog epilog; do
  cat >"$WORK/$script.sh" <<SCRIPT
#!/bin/sh
echo "\$SLURM_JOB_ID \$SLURMD_NODENAME \$SLURM_JOB_USER" >>"$WORK/$script.log"
if [ -e "$WORK/bad-$script-\$COHORT_NODENAME" ]; then
  echo "$script check: GPU 3 fell off the bus"
  exit 1
fi
SCRIPT
  chmod 755 "$WORK/$script.sh"
done
EXTRA_CONF="HealthCheckProgram=$WORK/health.sh
HealthCheckInterval=1
Prolog=$WORK/prolog.sh
Epilog=$WORK/epilog.sh" start_cluster

show_node() { cohort show node "$1" 2>&1; }
drained_by_check() { show_node "$1" | grep -q "health check failed: /scratch is 97% full"; }

touch "$WORK/sick-node03"
wait_until 20 drained_by_check node03 || fail "node03 was not drained by its check: $(show_node node03)"
show_node node03 | grep -Eq "DRAIN(ED|ING)" || fail "node03 is not draining: $(show_node node03)"
id=$(submit -N 16 -- true)
wait_until 30 considered "$id" || fail "no pass considered job $id"
[ "$(job_state "$id")" = PENDING ] || fail "a 16-node job started with node03 unhealthy"
pass "a failing check drains its node with the check's output as the reason"

rm "$WORK/sick-node03"
wait_until 20 finished "$id" || fail "job $id did not run once node03 was healthy: $(show_node node03)"
show_node node03 | grep -q "health check" && fail "node03 still says: $(show_node node03)"
pass "a passing check resumes the node it drained"

cohort drain node04 --reason "new DIMMs" || fail "drain refused"
touch "$WORK/sick-node04"
sleep 3
show_node node04 | grep -q "new DIMMs" || fail "the check took over node04: $(show_node node04)"
rm "$WORK/sick-node04"
sleep 3
show_node node04 | grep -q "new DIMMs" || fail "the check resumed an operator's drain: $(show_node node04)"
grep -q "health_failed node=node04" "$WORK/agent.log" || fail "the agent did not log node04's failed check"
pass "a node an operator drained is the operator's to resume"

# Prolog and epilog: once per node of the job, with its id, node and user.
id=$(submit -N 2 -w node[05-06] -- true)
wait_until 30 state_is "$id" COMPLETED || fail "job $id is $(job_state "$id")"
epilogs() { [ "$(grep -c "^$id " "$WORK/epilog.log" 2>/dev/null)" = 2 ]; }
wait_until 10 epilogs || fail "epilogs of job $id: $(cat "$WORK/epilog.log" 2>&1)"
for node in node05 node06; do
  grep -qx "$id $node root" "$WORK/prolog.log" || fail "no prolog of job $id on $node: $(cat "$WORK/prolog.log")"
  grep -qx "$id $node root" "$WORK/epilog.log" || fail "no epilog of job $id on $node"
done
pass "the prolog and the epilog ran on node05 and node06 for job $id"

# A failed prolog drains its node and requeues the job, which waits for it.
touch "$WORK/bad-prolog-node07"
id=$(submit -N 1 -w node07 -- true)
drained_by_prolog() { show_node node07 | grep -q "prolog failed: prolog check: GPU 3 fell off the bus"; }
wait_until 20 drained_by_prolog || fail "node07 was not drained by its prolog: $(show_node node07)"
requeued() { state_is "$id" PENDING && cohort show job "$id" --json | grep -q '"attempt": *2'; }
wait_until 20 requeued || fail "job $id was not requeued: $(cohort show job "$id" 2>&1 | head -5)"
rm "$WORK/bad-prolog-node07"
cohort resume node07 || fail "resume refused"
wait_until 30 state_is "$id" COMPLETED || fail "job $id did not run again once node07 was resumed"
pass "a failed prolog drains node07 with its output and requeues job $id, which ran once resumed"

# A failed epilog drains its node; the job keeps how it ended.
touch "$WORK/bad-epilog-node08"
id=$(submit -N 1 -w node08 -- true)
wait_until 30 state_is "$id" COMPLETED || fail "job $id is $(job_state "$id")"
drained_by_epilog() { show_node node08 | grep -q "epilog failed: epilog check: GPU 3 fell off the bus"; }
wait_until 20 drained_by_epilog || fail "node08 was not drained by its epilog: $(show_node node08)"
state_is "$id" COMPLETED || fail "job $id is $(job_state "$id") after its epilog failed"
pass "a failed epilog drains node08; job $id stays COMPLETED"
finish_test
