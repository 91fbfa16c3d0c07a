#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Allocations and steps, as Slurm users write them: a batch script runs
# once, on its allocation's first node; `cohort run` inside it starts steps
# over all or some of the allocation's nodes, each rank once; concurrent
# steps share the allocation; a step that never fits is refused with both
# numbers; a step's exit code, labelled output and Ctrl-C work inside a job;
# steps are listed with the job and outlive a controller killed with -9
# and their agent killed with -9.
source "$(dirname "$0")/lib.sh"
start_cluster
export PATH="$BIN/cli:$PATH"  # the scripts call cohort as a user's would
# Where `cohort run` would keep output files: a step's output must not go
# through any (it comes over the network); checked at the end.
mkdir -p "$WORK/rundir"
export COHORT_RUN_DIR="$WORK/rundir"

# The rendezvous every multi-node training script does: the head node from
# the allocation's list, then one step over every node.
cat >"$WORK/train.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N 4 --ntasks-per-node=2
head=$(cohort hostlist expand "$SLURM_JOB_NODELIST" | head -n1)
echo "batch on $COHORT_NODENAME nodes=$SLURM_NNODES tasks=$SLURM_NTASKS head=$head"
cohort run -- sh -c 'echo "rank $RANK of $WORLD_SIZE step $SLURM_STEP_ID on $COHORT_NODENAME master $MASTER_ADDR nodeid $SLURM_NODEID"' ||
  exit 3
SCRIPT
chmod +x "$WORK/train.sh"
id=$(submit -o "$WORK/train-%j.out" "$WORK/train.sh")
[ -n "$id" ] || { fail "the batch script was refused"; finish_test; }
wait_until 60 finished "$id" || fail "job $id did not end"
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id"): $(cat "$WORK/train-$id.out")"
out=$(cat "$WORK/train-$id.out")
[ "$(grep -c '^batch on' <<<"$out")" -eq 1 ] || fail "the batch script did not run once: $out"
grep -q "^batch on node01 nodes=4 tasks=8 head=node01$" <<<"$out" ||
  fail "the batch step's environment: $(grep '^batch' <<<"$out")"
for rank in 0 1 2 3 4 5 6 7; do
  [ "$(grep -c "^rank $rank of 8 step 0 " <<<"$out")" -eq 1 ] ||
    fail "rank $rank of step 0 did not print exactly once: $out"
done
grep -q "^rank 7 of 8 step 0 on node04 master 127.0.0.1 nodeid 3$" <<<"$out" ||
  fail "rank 7's step environment: $(grep '^rank 7' <<<"$out")"
pass "a 4-node batch script ran once and its step ran each of 8 ranks once"

show=$(cohort show job "$id" --json)
grep -q '"name": *"batch"' <<<"$show" || fail "show job lists no batch step: $show"
grep -q '"name": *"0"' <<<"$show" || fail "show job lists no step 0: $show"
history=$(cohort history -j "$id" -P)
grep -q "^$id\.0|.*|COMPLETED|0:0||[1-9][0-9]*K|[0-9][0-9]:[0-9][0-9]\.[0-9]*$" <<<"$history" ||
  fail "history's line of step $id.0 lacks its MaxRSS and TotalCPU: $history"
grep -q "^$id\.batch|batch|.*|COMPLETED|0:0|" <<<"$history" || fail "history lacks $id.batch: $history"
pass "the job lists its batch step and step 0, with what the step used"

# Two concurrent steps of two nodes each in a 4-node allocation; a third
# that asks more nodes than there are is refused with both numbers; a step's
# exit code comes back through cohort run.
cat >"$WORK/pair.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N 4
cohort run -N 2 -- sh -c 'echo "a $SLURM_STEP_ID $COHORT_NODENAME $SLURM_STEP_NODELIST"; sleep 2' &
cohort run -N 2 -- sh -c 'echo "b $SLURM_STEP_ID $COHORT_NODENAME $SLURM_STEP_NODELIST"; sleep 2' &
wait
cohort run -N 5 -- true 2>&1 && echo "five nodes: accepted"
cohort run -N 1 -- sh -c 'exit 7'
echo "exit=$?"
SCRIPT
chmod +x "$WORK/pair.sh"
id=$(submit -o "$WORK/pair-%j.out" "$WORK/pair.sh")
wait_until 60 finished "$id" || fail "job $id did not end"
out=$(cat "$WORK/pair-$id.out")
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id"): $out"
a=$(grep '^a ' <<<"$out" | awk '{print $4}' | sort -u)
b=$(grep '^b ' <<<"$out" | awk '{print $4}' | sort -u)
if [ "$(grep -c '^[ab] ' <<<"$out")" -ne 4 ] || [ "$a" = "$b" ]; then
  fail "two concurrent 2-node steps did not take two nodes each: $out"
fi
grep -q "the step asks for 5 nodes, but the allocation has 4; ask for -N 4 or fewer" <<<"$out" ||
  fail "a 5-node step in a 4-node job: $out"
grep -q "five nodes: accepted" <<<"$out" && fail "a 5-node step was accepted"
grep -q "^exit=7$" <<<"$out" || fail "cohort run did not exit with the step's code 7: $out"
pass "two concurrent steps shared the allocation; a step too big was refused; exit codes pass"

# An interactive allocation: the command runs here with the allocation's
# environment, its steps on the nodes; the allocation ends with it.
out=$(cohort alloc -N 2 -- sh -c 'cohort run hostname; cohort run -- sh -c "echo on \$COHORT_NODENAME";
  echo "alloc $SLURM_JOB_ID nodes=$SLURM_NNODES list=$SLURM_JOB_NODELIST"' 2>"$WORK/alloc.err")
rc=$?
[ "$rc" -eq 0 ] || fail "cohort alloc exited $rc: $(cat "$WORK/alloc.err")"
[ "$(grep -cx "$(hostname)" <<<"$out")" -eq 2 ] || fail "cohort run hostname inside alloc -N 2: $out"
[ "$(grep -c '^on node0[12]$' <<<"$out")" -eq 2 ] || fail "the step did not run on both nodes: $out"
allocated=$(sed -n 's/^alloc \([0-9]*\) nodes=2 list=node\[01-02\]$/\1/p' <<<"$out")
[ -n "$allocated" ] || fail "the allocation's environment: $out"
wait_until 30 finished "$allocated" || fail "allocation $allocated did not end with its command"
[ "$(job_state "$allocated")" = COMPLETED ] || fail "allocation $allocated is $(job_state "$allocated")"
cohort alloc -N 1 -- sh -c 'exit 4' 2>/dev/null
rc=$?
[ "$rc" -eq 4 ] || fail "cohort alloc did not exit with its command's status 4 ($rc)"
pass "cohort alloc ran its command with the allocation's environment and steps on its nodes"

# A running allocation: steps from outside it (--jobid), labelled output,
# Ctrl-C of a step, and its steps across a controller killed with -9.
alloc=$(submit -N 2 --ntasks-per-node 2 -o /dev/null -- sleep 300)
wait_until 30 state_is "$alloc" RUNNING || fail "job $alloc did not start"
out=$(cohort run --jobid "$alloc" -l -- sh -c 'echo "hi from $SLURM_PROCID"')
for rank in 0 1 2 3; do
  grep -qx "$rank: hi from $rank" <<<"$out" || fail "labelled output of rank $rank: $out"
done
pass "cohort run --jobid ran a step in a running job with labelled output"

out=$(echo "piped in" | cohort run --jobid "$alloc" -N 1 -n 1 -- cat)
[ "$out" = "piped in" ] || fail "stdin did not reach rank 0: $out"
out=$(printf 'a\nb\n' | cohort run --jobid "$alloc" -n 4 -l -- sh -c 'n=$(wc -l); echo "read $n"')
grep -qx "0: read 2" <<<"$out" && [ "$(grep -c ': read 0$' <<<"$out")" -eq 3 ] ||
  fail "stdin should reach rank 0 alone: $out"
out=$(echo "x" | cohort run --jobid "$alloc" -N 1 -n 1 --input none -- sh -c 'wc -l')
[ "$out" = 0 ] || fail "--input none still passed stdin: $out"
big=$(cohort run --jobid "$alloc" -N 1 -n 1 -- sh -c 'head -c 3000000 /dev/zero | tr "\0" x; echo' | wc -c)
[ "$big" -eq 3000001 ] || fail "3 MB of a rank's output arrived as $big bytes"
[ -z "$(ls -A "$WORK/rundir")" ] || fail "a step's output went through files: $(ls "$WORK/rundir")"
pass "a step's output and stdin went over the network, whole, with no output file"

# The binary itself, not the cohort function: $! must be its pid.
# Each rank says when its trap is set; Ctrl-C comes after all four did (a
# fixed pause lost that race on a loaded machine).
"$BIN/cli/cohort" run --jobid "$alloc" -- sh -c 'trap "echo interrupted; exit 9" INT
  touch "$0.$SLURM_PROCID"; sleep 60 & wait' "$WORK/int.ready" \
  >"$WORK/int.out" 2>"$WORK/int.err" &
runner=$!
# The running step of the allocation, by `cohort queue -s` (STEPID NAME STATE ...).
running_step() {
  cohort queue -s --noheader | awk -v j="$alloc." 'index($1, j) == 1 && $3 == "RUNNING" {
    print substr($1, length(j) + 1) }'
}
step_runs() { [ -n "$(running_step)" ]; }
wait_until 30 step_runs || fail "the step of job $alloc did not start"
traps_set() { [ "$(ls "$WORK"/int.ready.* 2>/dev/null | wc -l)" -eq 4 ]; }
wait_until 30 traps_set || fail "the step's 4 ranks did not all start: $(ls "$WORK")"
kill -INT "$runner"
wait "$runner"
rc=$?
[ "$rc" -eq 9 ] || fail "cohort run after Ctrl-C exited $rc, not the step's 9: $(cat "$WORK/int.err")"
grep -q "interrupted" "$WORK/int.out" || fail "the ranks did not get SIGINT: $(cat "$WORK/int.out")"
state_is "$alloc" RUNNING || fail "Ctrl-C of a step ended job $alloc ($(job_state "$alloc"))"
pass "Ctrl-C of a step reached its ranks and left the allocation running"

# --pty: a shell on a compute node. `script` gives cohort run a terminal
# and types into it; the shell's tty is a pseudo-terminal of the node.
out=$( (sleep 1; printf 'tty; echo "pty on $COHORT_NODENAME"; exit 3\n'; sleep 2) |
  script -qec "$BIN/cli/cohort run --jobid $alloc --pty bash --norc" /dev/null)
rc=$?
[ "$rc" -eq 3 ] || fail "cohort run --pty bash exited $rc, not the shell's 3: $out"
grep -q "/dev/pts/" <<<"$out" && grep -q "pty on node0[12]" <<<"$out" ||
  fail "cohort run --pty bash did not give a shell on a terminal of the node: $out"
pass "cohort run --pty bash was a shell on a pseudo-terminal of a compute node"

# An agent restarted under a running step: the stepd keeps the ranks and
# their output stream; the new agent adopts the step and reports its end.
# The kill waits for the rank itself: a step the controller counts as
# started may not have its stepd yet, and a launch the agent took but never
# started is lost with it (the step fails, "cohort-stepd did not start").
"$BIN/cli/cohort" run --jobid "$alloc" -N 1 -- \
  sh -c 'touch "$0"; sleep 3; echo "after the agent restart"' "$WORK/adopted.ran" \
  >"$WORK/adopted.out" 2>"$WORK/adopted.err" &
runner=$!
wait_until 30 test -e "$WORK/adopted.ran" || fail "the step of job $alloc did not start"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
start_agent
wait "$runner"
rc=$?
[ "$rc" -eq 0 ] || fail "cohort run across an agent restart exited $rc: $(cat "$WORK/adopted.err")"
grep -qx "after the agent restart" "$WORK/adopted.out" ||
  fail "the step's output across an agent restart: $(cat "$WORK/adopted.out")"
wait_until 30 all_nodes_up || fail "nodes did not register again"
state_is "$alloc" RUNNING || fail "job $alloc is $(job_state "$alloc") after the agent restart"
pass "a step outlived its agent's kill -9: its output came and its end was reported"
cohort cancel "$alloc"
wait_until 30 finished "$alloc" || fail "job $alloc did not end"

# The controller killed with -9 while a batch script's step runs: the script
# and the step keep running, the step's end is recorded, and the script
# goes on to its end.
cat >"$WORK/crash.sh" <<'SCRIPT'
#!/bin/sh
#SBATCH -N 2
cohort run -N 1 -- sh -c 'touch "$STEP_RAN"; sleep 4; exit 5'
echo "step exit=$?"
SCRIPT
chmod +x "$WORK/crash.sh"
export STEP_RAN="$WORK/step-ran"
crash=$(submit -o "$WORK/crash-%j.out" "$WORK/crash.sh")
# Its ranks run: the step is durable (launches wait for its record).
wait_until 30 test -e "$STEP_RAN" || fail "the step of job $crash did not start"
crash_controller
restart_controller
wait_until 60 finished "$crash" || fail "job $crash did not end after the controller's restart"
[ "$(job_state "$crash")" = COMPLETED ] || fail "job $crash is $(job_state "$crash")"
grep -qx "step exit=5" "$WORK/crash-$crash.out" ||
  fail "the batch script did not see its step's exit 5: $(cat "$WORK/crash-$crash.out")"
history=$(cohort history -j "$crash" -P)
grep -q "^$crash\.0|.*|FAILED|5:0|" <<<"$history" &&
  grep -q "^$crash\.batch|batch|.*|COMPLETED|0:0|" <<<"$history" ||
  fail "history does not show step $crash.0 FAILED 5:0 and the batch step COMPLETED: $history"
pass "a batch script and its step outlived a controller killed with -9; history has the step's exit"
finish_test
