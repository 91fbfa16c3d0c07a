#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# High availability over PostgreSQL: a real PostgreSQL 15 server of the
# test's own, two controllers sharing it (one active, one standby) and an
# emulating agent that knows both. Four clients submit while the active
# controller is killed (kill -9): the standby takes over, every job that
# was acknowledged exists once and completes, a 4-node job running across
# the takeover ends with its exit code, an account, a user and a
# reservation operators made before it (sacctmgr, scontrol) are there with
# their audit, and the killed controller comes back as the standby. Then fencing: the active controller is paused
# (SIGSTOP) until the standby took over, and once resumed it commits
# nothing.
source "$(dirname "$0")/lib.sh"

start_postgres
EXTRA_CONF="StateBackend=postgresql
StateDatabase=\"$PG_CONNINFO\"
ControllerTimeout=3
StateSync=off" write_cluster_conf
export COHORT_CONF="$WORK/cohort.conf"

declare -A CTL_PID
# start_ha_controller NAME PORT: a controller with its own StateDir (its
# local socket) and log, on PORT (0: any, written to $WORK/port-NAME).
start_ha_controller() {
  local name=$1 port=$2
  rm -f "$WORK/port-$name"
  "$BIN/daemons/controller/cohort-controller" -c "$WORK/cohort.conf" \
    --state-dir "$WORK/state-$name" --port "$port" --port-file "$WORK/port-$name" \
    >>"$WORK/controller-$name.log" 2>&1 &
  CTL_PID[$name]=$!
  PIDS+=("$!")
  wait_until 20 test -s "$WORK/port-$name" ||
    { fail "controller $name did not start"; tail -20 "$WORK/controller-$name.log"; exit 1; }
}
logged() { grep -q "$2" "$WORK/controller-$1.log"; }
show_logs() {
  for name in a b; do echo "--- controller $name"; tail -25 "$WORK/controller-$name.log"; done
}

start_ha_controller a 0
wait_until 20 logged a leadership_acquired || { fail "controller a did not become active"; show_logs; exit 1; }
start_ha_controller b 0
wait_until 20 logged b controller_standby || { fail "controller b is not a standby"; show_logs; exit 1; }
A="127.0.0.1:$(cat "$WORK/port-a")"
B="127.0.0.1:$(cat "$WORK/port-b")"
export COHORT_CONTROLLER="$A,$B"
# The agent tries the standby first: it is sent on to the active one.
AGENT_CONTROLLERS="$B,$A" start_agent
wait_until 30 all_nodes_up || { fail "nodes did not register"; show_logs; exit 1; }
grep -q "not the active controller; the active one is $A" "$WORK/agent.log" &&
  pass "a standby answers with the active controller's address" ||
  fail "the agent was not told where the active controller is"
cohort queue --controller "$B" >/dev/null &&
  pass "the CLI, pointed at the standby, follows it to the active one" ||
  fail "the CLI did not follow the standby's redirect"

# What operators made before the takeover: an account with a budget and a
# user (sacctmgr, audited) and a reservation.
SLURM_BIN=$BIN/cli/slurm
"$SLURM_BIN/sacctmgr" -i add account lab GrpTRESMins=gres/gpu=600 >/dev/null &&
  "$SLURM_BIN/sacctmgr" -i add user root Account=lab >/dev/null ||
  fail "sacctmgr add account and user failed"
"$SLURM_BIN/scontrol" create reservation ReservationName=window StartTime=now+3600 Duration=30 \
  Nodes=node16 Users=root Flags=MAINT >/dev/null || fail "scontrol create reservation failed"

# A 4-node job that runs across the takeover and ends with exit code 3.
GANG=$(submit -N 4 -J gang --wrap 'sleep 8; exit 3')
wait_until 20 state_is "$GANG" RUNNING || fail "the 4-node job did not start"

# Four clients, each submitting one small job at a time until told to stop;
# each line of client-N.acked is an acknowledged job: its id and name.
client() {
  local n=0 out
  while [ ! -e "$WORK/stop-clients" ]; do
    n=$((n + 1))
    if out=$(cohort submit -J "c$1-$n" --wrap true 2>>"$WORK/client-$1.err"); then
      echo "$(sed -n 's/^Submitted job \([0-9]*\)$/\1/p' <<<"$out") c$1-$n" >>"$WORK/client-$1.acked"
    fi
  done
}
CLIENTS=()
for i in 1 2 3 4; do client "$i" & CLIENTS+=($!); done
sleep 2

kill -9 "${CTL_PID[a]}"
killed=$(date +%s%N)
wait "${CTL_PID[a]}" 2>/dev/null
if wait_until 30 cohort queue; then
  took_ms=$((($(date +%s%N) - killed) / 1000000))
  echo "takeover: the standby served ${took_ms} ms after kill -9 of the active controller"
  pass "the standby took over"
else
  fail "the standby did not take over"; show_logs
fi
sleep 3
touch "$WORK/stop-clients"
wait "${CLIENTS[@]}"

cat "$WORK"/client-*.acked >"$WORK/acked" 2>/dev/null
acked=$(wc -l <"$WORK/acked")
[ "$acked" -ge 8 ] && pass "clients got $acked submissions acknowledged" ||
  fail "only $acked submissions were acknowledged"
all_done() {
  local id name
  while read -r id name; do finished "$id" || return 1; done <"$WORK/acked"
  finished "$GANG"
}
wait_until 90 all_done || fail "not every acknowledged job finished"
# Exactly once: each acknowledged id holds its own job, no name twice.
lost=0
while read -r id name; do
  json=$(cohort show job "$id" --json 2>/dev/null)
  grep -q "\"name\": *\"$name\"" <<<"$json" && grep -q '"state": *"COMPLETED"' <<<"$json" ||
    { lost=$((lost + 1)); echo "job $id ($name): $(job_state "$id")"; }
done <"$WORK/acked"
[ "$lost" -eq 0 ] && pass "every acknowledged job exists and completed" ||
  fail "$lost acknowledged jobs are missing or did not complete"
# Asked of the database itself, as an operator would.
dups=$(psql "$PG_CONNINFO" -Atc \
  "SELECT name FROM cohort.jobs WHERE name LIKE 'c_-%' GROUP BY name HAVING count(*) > 1" | wc -l)
[ "$dups" -eq 0 ] && pass "no submission became two jobs" || fail "$dups names are held by two jobs"
twice=$(sed -n 's/.*launch_started job=\([0-9]*\) step=own .*/\1/p' "$WORK/agent.log" | sort | uniq -d)
[ -z "$twice" ] && pass "no job was launched twice" || fail "jobs launched twice: $twice"
gang=$(cohort show job "$GANG" --json)
grep -q '"exit_code": *3' <<<"$gang" && pass "the 4-node job ended with its exit code (3)" ||
  fail "the 4-node job did not end with exit code 3: $(job_state "$GANG")"

cohort history -j "$GANG" -P | grep "FAILED" | grep -q "|3:0" &&
  pass "cohort history reads the 4-node job from PostgreSQL" ||
  fail "history does not show the 4-node job: $(cohort history -j "$GANG" -P)"

"$SLURM_BIN/sacctmgr" -n -P show transactions format=Action,Where,Info >"$WORK/audit.txt" &&
  grep -qx 'Add Account|lab|GrpTRESMins=gres/gpu=600' "$WORK/audit.txt" &&
  grep -q '^Add User|root in lab|' "$WORK/audit.txt" &&
  "$SLURM_BIN/scontrol" show reservation window | grep -q 'Flags=MAINT' &&
  pass "the new active controller has the account and user sacctmgr added, their audit and the reservation" ||
  fail "after the takeover: $(cat "$WORK/audit.txt"); $("$SLURM_BIN/scontrol" show reservation 2>&1)"

# The killed controller comes back, as the standby.
start_ha_controller a "${A##*:}"
wait_until 20 logged a "controller_standby" || fail "controller a did not come back"
[ "$(grep -c leadership_acquired "$WORK/controller-a.log")" -eq 1 ] &&
  pass "the old controller came back as a standby" || fail "the old controller took over again"
cohort queue --controller "$A" >/dev/null || fail "the returned standby does not redirect"

# Fencing: the active controller (b) paused past ControllerTimeout.
kill -STOP "${CTL_PID[b]}"
wait_until 30 logged a "epoch=3" || { fail "a did not take over from the paused b"; show_logs; }
# Sent to the paused b alone (no other address to be sent on to), by the
# binary itself ($! is its pid): read
# once it resumes, after a took over.
"$BIN/cli/cohort" submit --controller "$B" -J fenced --wrap true >"$WORK/fenced.out" 2>&1 &
SENT=$!
# Its connection is made (the paused b's kernel accepts it) and its call
# written before b resumes: a fixed pause lost that race on a loaded machine.
sent_connected() { ss -Htnp state established "( dport = :${B##*:} )" | grep -q "pid=$SENT,"; }
wait_until 10 sent_connected || fail "the submission did not connect to the paused b"
sleep 0.3
kill -CONT "${CTL_PID[b]}"
wait "$SENT"
sent_rc=$?
if [ "$sent_rc" -eq 0 ]; then
  fail "the resumed old controller acknowledged a submission: $(cat "$WORK/fenced.out")"
elif grep -q "Submitted\|not expected\|--help" "$WORK/fenced.out"; then
  fail "the submission to the old controller went wrong: $(cat "$WORK/fenced.out")"
else
  pass "the resumed old controller acknowledged nothing (exit $sent_rc: $(head -c 160 "$WORK/fenced.out"))"
fi
wait_until 20 logged b "controller_demoted" || fail "the resumed controller did not step down"
grep -Eq "leadership_lost|fenced" "$WORK/controller-b.log" &&
  pass "the old controller learnt it was fenced" || fail "b's log says nothing of the lost lease"
wait_until 20 bash -c "[ \$(grep -c controller_standby '$WORK/controller-b.log') -ge 2 ]" &&
  pass "the resumed controller waits as a standby again" || fail "b did not return as a standby"
count=$(psql "$PG_CONNINFO" -Atc "SELECT count(*) FROM cohort.jobs WHERE name = 'fenced'")
[ "$count" = 0 ] && pass "nothing the old controller sent was committed" ||
  fail "the fenced controller committed $count job(s)"
# The new active controller works on.
J=$(submit -J after --wrap true)
wait_until 20 state_is "$J" COMPLETED && pass "the new active controller runs jobs" ||
  fail "job $J did not complete on the new active controller"

[ "$FAILURES" -gt 0 ] && show_logs
finish_test
