#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reloading the configuration without stopping the cluster: SIGHUP and
# `cohort reconfigure` reread cohort.conf and the topology; valid files are
# applied (the controller restarts in place on the same ports, its jobs
# keep running), invalid ones are refused with every error located and the
# controller keeps running as it was; a file that would strand a job is
# refused naming the job; only root may reconfigure. LogFile= is reopened
# on SIGUSR2, as logrotate needs.
source "$(dirname "$0")/lib.sh"

cp "$ROOT/etc/demo/cluster.conf" "$WORK/cluster.conf"
log="$WORK/cohort-controller.log"
EXTRA_CONF="LogFile=$log"
start_cluster "$WORK/cluster.conf"
pid=$CONTROLLER_PID
port=$(cat "$WORK/port")
job=$(submit -p high -N 2 -- sleep 300)
wait_until 30 state_is "$job" RUNNING || fail "job $job did not start"
grep -q 'controller_started' "$log" || fail "LogFile has no controller_started: $(tail -3 "$log")"
pass "the controller logs to LogFile ($log)"

# A valid change: a new partition. SIGHUP applies it in place.
echo "PartitionName=debug Nodes=node[01-02] MaxTime=10" >>"$WORK/cluster.conf"
started=$(date +%s%N)
kill -HUP "$pid"
has_debug() { cohort nodes -p debug >/dev/null 2>&1; }
wait_until 20 has_debug || fail "partition debug did not appear: $(grep reconfigure "$log")"
echo "the reloaded controller answered $(( ($(date +%s%N) - started) / 1000000 )) ms after SIGHUP"
kill -0 "$pid" || fail "the controller is gone after SIGHUP"
[ "$(cat "$WORK/port")" = "$port" ] || fail "the port moved from $port to $(cat "$WORK/port")"
grep -q 'reconfigure_applying' "$log" || fail "no reconfigure_applying in the log"
wait_until 30 all_nodes_up || fail "the agents did not come back"
state_is "$job" RUNNING || fail "job $job is $(job_state "$job") after the reload"
debug_job=$(submit -p debug -N 1 -- true)
wait_until 30 state_is "$debug_job" COMPLETED || fail "a job in the new partition did not run"
pass "SIGHUP applied a new partition (job $debug_job ran in it) on port $port; job $job kept running"

# An invalid file: refused, located, and nothing changes.
echo "PartitionName=broken Nodes=nodeX[" >>"$WORK/cluster.conf"
line=$(wc -l <"$WORK/cluster.conf")
kill -HUP "$pid"
refused() { grep -q 'reconfigure_refused' "$log"; }
wait_until 10 refused || fail "a broken file was not refused: $(tail -3 "$log")"
grep -q "reconfigure_error .*cluster.conf:$line" "$log" || fail "the error is not located at line $line: $(grep reconfigure_error "$log")"
cohort nodes -p debug >/dev/null || fail "the controller stopped answering after a refused reload"
state_is "$job" RUNNING || fail "job $job is $(job_state "$job") after a refused reload"
pass "a broken line is refused at cluster.conf:$line; the controller runs on as it was"

# Removing the partition job $job runs in: refused, naming the job.
sed -i '/^PartitionName=broken/d; /^PartitionName=high/d' "$WORK/cluster.conf"
out=$(cohort reconfigure 2>&1) && fail "cohort reconfigure took a file that strands job $job: $out"
grep -q "job $job is RUNNING in partition high" <<<"$out" || fail "the refusal does not name job $job: $out"
pass "removing partition high under running job $job is refused, naming it"

# Only root reconfigures.
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/cli/cohort" reconfigure 2>&1) &&
  fail "nobody reconfigured the controller"
grep -q 'only root may' <<<"$out" || fail "the refusal does not say who may: $out"
echo "PartitionName=high Nodes=ALL MaxTime=1:00:00 DefaultTime=10 PriorityTier=10" >>"$WORK/cluster.conf"
out=$("$BIN/cli/slurm/scontrol" reconfigure 2>&1) || fail "root's reconfigure failed: $out"
grep -q 'restarts in place' <<<"$out" || fail "scontrol reconfigure said: $out"
# It answers once the new controller does (its third start in the log), so
# the very next command finds it, as after Slurm's.
[ "$(grep -c controller_started "$log")" -ge 3 ] ||
  fail "scontrol reconfigure answered before the controller restarted"
cohort queue >/dev/null || fail "the first command after scontrol reconfigure failed"
wait_until 30 all_nodes_up || fail "the agents did not come back after scontrol reconfigure"
state_is "$job" RUNNING || fail "job $job is $(job_state "$job") after scontrol reconfigure"
pass "only root may reconfigure; root's scontrol reconfigure applies the file and returns once it runs"

# scontrol show config: the settings in force, by Slurm's names, from the
# restarted controller.
config=$("$BIN/cli/slurm/scontrol" show config) || fail "scontrol show config failed: $config"
grep -Eq '^Configuration data as of [0-9]{4}-' <<<"$config" &&
  grep -Eq '^SlurmdTimeout += 10 sec$' <<<"$config" &&
  grep -Eq '^ClusterName += demo$' <<<"$config" &&
  grep -Eq '^KillWait += 5 sec$' <<<"$config" &&
  grep -Eq '^PreemptMode += REQUEUE$' <<<"$config" &&
  grep -Eq "^StateSaveLocation += $WORK/state\$" <<<"$config" ||
  fail "scontrol show config: $config"
pass "scontrol show config lists the settings in force (SlurmdTimeout = 10 sec, …)"

# logrotate: the file is moved away, SIGUSR2 opens a new one.
mv "$log" "$log.1"
kill -USR2 "$pid"
reopened() { [ -s "$log" ] && grep -q log_reopened "$log"; }
wait_until 10 reopened || fail "no new log file after SIGUSR2"
cohort cancel "$job" >/dev/null
wait_until 30 state_is "$job" CANCELLED || fail "job $job was not cancelled"
grep -q "job_state job=$job .*to=CANCELLED" "$log" || fail "the new log file misses job $job's end"
pass "after logrotate moved the file, SIGUSR2 reopened LogFile; lines go to the new file"
finish_test
