#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# HealthCheckProgram: a node whose check fails is drained with the check's
# output as the reason and takes no new job; it is resumed once the check
# passes again; a node an operator drained stays drained whatever its check
# says. The check here fails for the nodes a file names.
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
EXTRA_CONF="HealthCheckProgram=$WORK/health.sh
HealthCheckInterval=1" start_cluster

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
finish_test
