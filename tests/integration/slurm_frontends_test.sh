#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm's commands as users and their tools run them: the `cohort` binary
# under the names in $BIN/cli/slurm. submitit's command lines and its
# parsing of their output (`job (\d+)` from sbatch, sacct's |-separated
# table with step rows); Lightning's requeue (SIGUSR1, then `scontrol
# requeue $SLURM_JOB_ID` from inside the job); squeue, sinfo and scontrol's
# formats; the GPU request vocabulary and GPU types; --begin, --deadline,
# -W; and every option of docs/slurm.md's table parsing as the table says.
source "$(dirname "$0")/lib.sh"
SLURM_BIN=$BIN/cli/slurm
[ -x "$SLURM_BIN/sbatch" ] || { fail "no $SLURM_BIN/sbatch: the build makes the links"; finish_test; }
export PATH="$SLURM_BIN:$BIN/cli:$PATH"

# Two kinds of GPU node under two leaf switches, as Slurm's slurm.conf
# writes them.
cat >"$WORK/cluster.conf" <<'CONF'
ClusterName=frontends
NodeTimeout=10
KillWait=2
NodeName=node[01-04] CPUs=32 MemoryMB=256000 Gres=gpu:h100:8 Features=emulated
NodeName=node[05-08] CPUs=16 MemoryMB=128000 Gres=gpu:a100:4 Features=emulated
PartitionName=gpu Nodes=ALL Default=YES MaxTime=1:00:00 DefaultTime=10
PartitionName=high Nodes=ALL MaxTime=2:00:00 DefaultTime=10 PriorityTier=10
AccountName=research Shares=1
CONF
cat >"$WORK/topology.conf" <<'CONF'
SwitchName=leaf[1-2] Nodes=node[01-08]
SwitchName=spine Switches=leaf[1-2]
CONF
start_cluster "$WORK/cluster.conf" "$WORK/topology.conf"

field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1; }

# --- submitit: sbatch FILE, `job (\d+)`, sacct -o JobID,State --parsable2 -j
cat >"$WORK/submitit.sh" <<SCRIPT
#!/bin/bash

# Parameters
#SBATCH --cpus-per-task=2
#SBATCH --error=$WORK/%j_0_log.err
#SBATCH --gpus-per-node=1
#SBATCH --job-name=submitit
#SBATCH --mem=16GB
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=$WORK/%j_0_log.out
#SBATCH --signal=USR2@90
#SBATCH --time=5
#SBATCH --wckey=submitit

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output $WORK/%j_%t_log.out --error $WORK/%j_%t_log.err sh -c 'echo "task \$SLURM_PROCID of \$SLURM_NTASKS in \$SLURM_JOB_ID"'
SCRIPT
out=$(sbatch "$WORK/submitit.sh")
id=$(sed -En 's/.*job ([0-9]+).*/\1/p' <<<"$out")
[ "$out" = "Submitted batch job $id" ] || fail "sbatch printed \"$out\""
sacct_state() {
  sacct -o JobID,State,NodeList --parsable2 -j "$id" | sed -n "s/^$id|\([A-Z_]*\)|.*/\1/p"
}
sacct_done() { case "$(sacct_state)" in COMPLETED|FAILED|CANCELLED|TIMEOUT) return 0;; esac; return 1; }
wait_until 60 sacct_done || fail "submitit job $id did not end: $(sacct -P -j "$id")"
table=$(sacct -o JobID,State,NodeList --parsable2 -j "$id")
[ "$(head -n1 <<<"$table")" = "JobID|State|NodeList" ] || fail "sacct header: $table"
grep -q "^$id|COMPLETED|node" <<<"$table" || fail "sacct job row: $table"
grep -q "^$id.batch|COMPLETED|" <<<"$table" || fail "sacct batch step row: $table"
grep -q "^$id.0|COMPLETED|" <<<"$table" || fail "sacct step 0 row: $table"
[ "$(sacct -n -X -P -o JobID -j "$id")" = "$id" ] || fail "sacct -n -X: $(sacct -n -X -P -j "$id")"
for task in 0 1; do
  grep -qx "task $task of 2 in $id" "$WORK/${id}_${task}_log.out" 2>/dev/null ||
    fail "srun --output %j_%t: task $task wrote $(cat "$WORK/${id}_${task}_log.out" 2>&1)"
done
[ "$(field "$id" MemPerNode)" = 16384M ] || fail "--mem=16GB gave MemPerNode=$(field "$id" MemPerNode)"
[ "$(field "$id" WCKey)" = submitit ] || fail "--wckey not shown: $(scontrol show job "$id")"
# submitit cancels with scancel ID.
long=$(sbatch --parsable --wrap "sleep 300")
scancel "$long" || fail "scancel $long failed"
cancelled() { [ "$(sacct -n -X -P -o State -j "$long")" = CANCELLED ]; }
wait_until 20 cancelled || fail "scancel: job $long is $(sacct -n -X -P -o State -j "$long")"
# scancel by filters: a pending array's tasks not yet started go too.
sweep=$(sbatch --parsable -H --array=0-3 -J sweep --wrap true)
scancel --me -n sweep -t PENDING || fail "scancel --me -n sweep failed"
swept() { [ -z "$(squeue -h -j "$sweep" -t PD -o %i)" ]; }
wait_until 10 swept || fail "scancel -n sweep left $(squeue -h -j "$sweep" -o '%i %T')"
pass "submitit's command lines and parsing"

# --- Lightning: on SIGUSR1, rank 0 runs scontrol requeue $SLURM_JOB_ID
export MARK=$WORK/lightning-mark
cat >"$WORK/lightning.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N 1 --requeue --open-mode=append
srun sh -c '
  if [ -e "$MARK" ]; then echo "resumed in $SLURM_JOB_ID"; exit 0; fi
  touch "$MARK"
  trap "scontrol requeue \$SLURM_JOB_ID; sleep 30" USR1
  echo "training in $SLURM_JOB_ID"
  while :; do sleep 0.2; done'
SCRIPT
light=$(sbatch --parsable -o "$WORK/lightning-%j.out" "$WORK/lightning.sh")
training() { grep -q "^training in $light" "$WORK/lightning-$light.out" 2>/dev/null; }
wait_until 30 training || fail "lightning job $light did not start: $(squeue -j "$light")"
scancel --signal=USR1 "$light" || fail "scancel --signal=USR1 $light failed"
resumed() { [ "$(sacct -n -X -P -o State -j "$light")" = COMPLETED ]; }
wait_until 60 resumed || fail "lightning job $light: $(sacct -P -j "$light"); $(cat "$WORK/lightning-$light.out")"
grep -q "^resumed in $light" "$WORK/lightning-$light.out" || fail "not resumed: $(cat "$WORK/lightning-$light.out")"
[ "$(sacct -n -X -P -o Restarts -j "$light")" = 1 ] || fail "restarts: $(sacct -n -X -P -o Restarts -j "$light")"
pass "Lightning's requeue from inside the job"

# --- squeue, sinfo and scontrol formats
run=$(sbatch --parsable -J fmt -N 2 --wrap "sleep 300")
running() { [ "$(squeue -h -j "$run" -o %T)" = RUNNING ]; }
wait_until 30 running || fail "job $run did not start: $(squeue)"
line=$(squeue -h -j "$run" -o "%i %j %T %M %l %D %R %N")
read -r q_id q_name q_state q_time q_limit q_nodes q_reason q_list <<<"$line"
[ "$q_id $q_name $q_state $q_limit $q_nodes" = "$run fmt RUNNING 10:00 2" ] &&
  [ "$q_reason" = "$q_list" ] && [[ $q_time =~ ^[0-9]+:[0-9][0-9]$ ]] ||
  fail "squeue -h -o: $line"
[ "$(SQUEUE_FORMAT='%i|%T' squeue -h -j "$run")" = "$run|RUNNING" ] ||
  fail "SQUEUE_FORMAT: $(SQUEUE_FORMAT='%i|%T' squeue -h -j "$run")"
header=$(squeue -j "$run" -O JobID:10,State | head -n1)
[ "$(tr -s ' ' <<<"$header" | sed 's/ $//')" = "JOBID STATE" ] || fail "squeue -O header: \"$header\""
squeue | head -n1 | grep -q "JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)" ||
  fail "squeue's default header: $(squeue | head -n1)"
sinfo -h -o "%P %a %l %D %t %G" >"$WORK/sinfo"
grep -qx "gpu\* up 1:00:00 [0-9] [a-z]* gpu:h100:8" "$WORK/sinfo" || fail "sinfo -h -o: $(cat "$WORK/sinfo")"
grep -q "gpu:a100:4" "$WORK/sinfo" || fail "sinfo %G: $(cat "$WORK/sinfo")"
[ "$(sinfo -h -N -n node05 -p gpu -o '%N %c %m %G')" = "node05 16 128000 gpu:a100:4" ] ||
  fail "sinfo -N: $(sinfo -h -N -n node05 -p gpu -o '%N %c %m %G')"
# sinfo -s: a line a partition, its nodes counted (the fmt job holds 2).
summary=$(sinfo -s -p gpu)
[ "$(head -n1 <<<"$summary" | tr -s ' ')" = "PARTITION AVAIL TIMELIMIT NODES(A/I/O/T) NODELIST" ] &&
  [[ $(tail -n +2 <<<"$summary" | tr -s ' ') =~ ^gpu\*\ up\ 1:00:00\ ([0-9])/([0-9])/0/8\ node\[01-08\]$ ]] &&
  [ "${BASH_REMATCH[1]}" -ge 2 ] && [ $((BASH_REMATCH[1] + BASH_REMATCH[2])) = 8 ] ||
  fail "sinfo -s: $summary"
[ "$(scontrol show hostnames 'node[01-03]' | tr '\n' ' ')" = "node01 node02 node03 " ] ||
  fail "scontrol show hostnames: $(scontrol show hostnames 'node[01-03]')"
[ "$(scontrol show hostlist node01,node02,node03)" = "node[01-03]" ] ||
  fail "scontrol show hostlist: $(scontrol show hostlist node01,node02,node03)"
scontrol show job "$run" | grep -q "^JobId=$run JobName=fmt" || fail "scontrol show job: $(scontrol show job "$run")"
[ "$(field "$run" JobState)" = RUNNING ] || fail "scontrol JobState: $(scontrol show job "$run")"
scontrol show partition gpu | grep -q "^PartitionName=gpu" || fail "scontrol show partition"
# -S (descending id, then by id), -w (jobs on these nodes), -i (again each
# second, under its time).
later=$(sbatch --parsable --hold -o /dev/null --wrap true)
[ "$(squeue -h -S -i -j "$run,$later" -o %i | tr '\n' ' ')" = "$later $run " ] &&
  [ "$(squeue -h -S i -j "$run,$later" -o %i | tr '\n' ' ')" = "$run $later " ] ||
  fail "squeue -S: $(squeue -h -S -i -j "$run,$later" -o %i | tr '\n' ' ')"
first_node=$(scontrol show hostnames "$(squeue -h -j "$run" -o %N)" | head -n1)
[ "$(squeue -h -w "$first_node" -o %i)" = "$run" ] && [ -z "$(squeue -h -w node08 -o %i)" ] ||
  fail "squeue -w $first_node: $(squeue -h -w "$first_node" -o %i)"
iterated=$(timeout 2.5 squeue -i 1 -h -j "$run" -o %i)
[ "$(grep -cx "$run" <<<"$iterated")" -ge 2 ] &&
  [ "$(grep -Ec '^[A-Z][a-z]{2} [A-Z][a-z]{2} ' <<<"$iterated")" -ge 2 ] ||
  fail "squeue -i 1: $iterated"
scancel "$run" "$later"
pass "squeue, sinfo and scontrol formats; squeue -S, -w and -i"

# --- scontrol hold, update, release on a pending job
held=$(sbatch --parsable -H -t 30 --wrap true)
scontrol update JobId="$held" TimeLimit=20 Partition=high NumNodes=2 ||
  fail "scontrol update refused"
[ "$(squeue -h -j "$held" -o '%P %D %l')" = "high 2 20:00" ] ||
  fail "scontrol update: $(squeue -h -j "$held" -o '%P %D %l')"
[ "$(squeue -h --me -j "$held" -o %i)" = "$held" ] || fail "squeue --me: $(squeue -h --me -o %i)"
scontrol update JobId="$held" Priority=5 2>"$WORK/update.err" && fail "update Priority= was taken"
grep -q "Priority cannot be changed here" "$WORK/update.err" || fail "update: $(cat "$WORK/update.err")"
scontrol release "$held" || fail "scontrol release failed"
wait_until 30 finished "$held" || fail "released job $held did not run"
pass "scontrol update and release"

# --- sbatch's default output file, where Slurm users look: slurm-<id>.out,
# an array's slurm-<array id>_<task>.out, in the working directory.
plain=$(cd "$WORK" && sbatch --parsable -t 1 --wrap "echo default output") || fail "sbatch refused"
array=$(cd "$WORK" && sbatch --parsable -t 1 --array=0-1 --wrap 'echo task $SLURM_ARRAY_TASK_ID') ||
  fail "sbatch --array refused"
wait_until 30 finished "$plain" || fail "job $plain did not finish"
for task in 0 1; do
  wait_until 30 finished "${array}_$task" || fail "task ${array}_$task did not finish"
done
grep -qx "default output" "$WORK/slurm-$plain.out" 2>/dev/null &&
  grep -qx "task 0" "$WORK/slurm-${array}_0.out" 2>/dev/null &&
  grep -qx "task 1" "$WORK/slurm-${array}_1.out" 2>/dev/null ||
  fail "sbatch's default output files: $(ls "$WORK" | grep -E '^(slurm|cohort)-')"
pass "sbatch without -o writes slurm-$plain.out, an array slurm-${array}_0.out and _1.out"

# --- salloc says what Slurm's says, which tools read: Granted job
# allocation N, then Relinquishing it.
out=$(salloc -N 1 -t 1 true 2>&1) || fail "salloc -N 1 true failed: $out"
grep -Eq "^salloc: Granted job allocation [0-9]+$" <<<"$out" &&
  grep -Eq "^salloc: Relinquishing job allocation [0-9]+$" <<<"$out" || fail "salloc's words: $out"
pass "salloc: Granted job allocation N ... Relinquishing job allocation N"
out=$(salloc -Q -N 1 -t 1 true 2>&1) || fail "salloc -Q failed: $out"
[ -z "$out" ] || fail "salloc -Q said: $out"
out=$(salloc --no-shell -N 1 -t 5 2>&1) || fail "salloc --no-shell failed: $out"
kept=$(sed -n 's/^salloc: Granted job allocation \([0-9]*\)$/\1/p' <<<"$out")
[ -n "$kept" ] && state_is "$kept" RUNNING && srun --jobid="$kept" -N 1 true ||
  fail "salloc --no-shell left no allocation to run in: $out"
scancel "$kept"
pass "salloc -Q says nothing; salloc --no-shell leaves its allocation running for srun --jobid"
scontrol ping | grep -Eq '^Slurmctld\(primary\) at .+ is UP$' || fail "scontrol ping: $(scontrol ping 2>&1)"
pass "scontrol ping: the controller is UP"

# --- -O/--overcommit: more tasks than CPUs, sharing them; the tasks see
# SLURM_OVERCOMMIT and the address srun ran from. 40 tasks on one node of
# at most 32 CPUs hold one CPU; a step of a 1-task job shares its CPU.
cat >"$WORK/over.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -O -n 40 -t 5
srun sh -c 'echo "$SLURM_PROCID $SLURM_OVERCOMMIT $SLURM_LAUNCH_NODE_IPADDR $SLURM_SRUN_COMM_HOST"'
srun -n 1 -O sh -c 'echo "cpus $SLURM_CPUS_ON_NODE"'
SCRIPT
over=$(sbatch --parsable -o "$WORK/over-%j.out" "$WORK/over.sh") || fail "sbatch -O refused: $over"
shared=$(sbatch --parsable -n 1 -o "$WORK/shared-%j.out" \
  --wrap 'srun -O -n 4 --exact sh -c "echo shared \$SLURM_PROCID"')
over_done() { finished "$over" && finished "$shared"; }
wait_until 60 over_done || fail "the overcommitted jobs did not finish: $(squeue)"
lines=$(grep -c '^[0-9]* 1 127\.0\.0\.1 127\.0\.0\.1$' "$WORK/over-$over.out" 2>/dev/null)
[ "$lines" = 40 ] && grep -qx "cpus 1" "$WORK/over-$over.out" &&
  [ "$(sacct -P -n --format=AllocCPUS -j "$over" | head -n1)" = 1 ] ||
  fail "sbatch -O -n 40: $lines tasks said so: $(head -5 "$WORK/over-$over.out" 2>&1)"
[ "$(grep -c '^shared [0-3]$' "$WORK/shared-$shared.out" 2>/dev/null)" = 4 ] ||
  fail "srun -O -n 4 in a 1-CPU job: $(cat "$WORK/shared-$shared.out" 2>&1)"
pass "-O/--overcommit: 40 tasks on one CPU, and srun -O -n 4 in a 1-CPU job"

# --- srun outside a job passes a piped or redirected stdin to rank 0, and
# --input=FILE reads a file there (Slurm's `echo x | srun cat`).
out=$(echo "piped line" | srun -N 1 -t 1 cat 2>/dev/null)
[ "$out" = "piped line" ] || fail "echo x | srun cat printed: $out"
printf 'from a file\n' >"$WORK/input.txt"
out=$(srun -N 1 -t 1 --input="$WORK/input.txt" cat 2>/dev/null </dev/null)
[ "$out" = "from a file" ] || fail "srun --input=FILE cat printed: $out"
out=$(srun -N 1 -t 1 cat </dev/null 2>/dev/null) && [ -z "$out" ] || fail "srun cat </dev/null: $out"
pass "srun outside a job: echo x | srun cat, srun --input=FILE cat, and /dev/null reads nothing"

# --- node and partition states as operators set them: scontrol update
# NodeName=… State=DRAIN|DOWN|RESUME Reason=…, sinfo -R, and a partition's
# State=DOWN (takes jobs, starts none), DRAIN (takes none) and UP again.
victim=$(sbatch --parsable -N 1 -w node08 --requeue --wrap "sleep 300")
wait_until 30 state_is "$victim" RUNNING || fail "job $victim did not start: $(squeue)"
scontrol update NodeName=node07 State=DRAIN Reason="bad fan" || fail "State=DRAIN refused"
scontrol update NodeName=node08 State=DOWN Reason="PSU swap" || fail "State=DOWN refused"
scontrol update NodeName=node06 State=DOWN 2>"$WORK/down.err" && fail "State=DOWN without a reason was taken"
grep -q "needs Reason=" "$WORK/down.err" || fail "State=DOWN without Reason: $(cat "$WORK/down.err")"
scontrol update NodeName=node06 State=BROKEN Reason=x 2>"$WORK/down.err" && fail "State=BROKEN taken"
grep -q "State=BROKEN: say DRAIN" "$WORK/down.err" || fail "State=BROKEN: $(cat "$WORK/down.err")"
# The job on the node set DOWN is stopped there and requeued, as for a lost node.
requeued() {
  [ "$(cohort show job "$victim" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["attempt"])' 2>/dev/null)" = 2 ]
}
wait_until 30 requeued || fail "job $victim was not requeued off node08: $(scontrol show job "$victim")"
reasons=$(sinfo -R -h)
grep -Eq "^bad fan +root +[0-9-]+T[0-9:]+ node07$" <<<"$reasons" &&
  grep -Eq "^PSU swap +root +[0-9-]+T[0-9:]+ node08$" <<<"$reasons" || fail "sinfo -R: $reasons"
[ "$(sinfo -R | head -1 | tr -s ' ')" = "REASON USER TIMESTAMP NODELIST" ] ||
  fail "sinfo -R's header: $(sinfo -R | head -1)"
scontrol show node node08 | grep -q "State=DOWN" || fail "node08: $(scontrol show node node08)"
scontrol update NodeName=node0[7-8] State=RESUME || fail "State=RESUME refused"
wait_until 10 test -z "$(sinfo -R -h)" || fail "sinfo -R after RESUME: $(sinfo -R -h)"
scancel "$victim"
pass "scontrol update NodeName= State=DRAIN|DOWN|RESUME Reason=, sinfo -R; a node set DOWN requeues its job"

scontrol update PartitionName=high State=DOWN || fail "partition State=DOWN refused"
[ "$(sinfo -h -p high -o %a | sort -u)" = down ] || fail "sinfo %a of a DOWN partition: $(sinfo -h -p high -o %a)"
waits=$(sbatch --parsable -p high --wrap true) || fail "a DOWN partition refused a job"
wait_until 10 test "$(squeue -h -j "$waits" -o %r)" = PartitionDown ||
  fail "job $waits in a DOWN partition: $(squeue -h -j "$waits" -o '%T %r')"
cohort why "$waits" | grep -q "partition high is DOWN" || fail "why: $(cohort why "$waits")"
scontrol update PartitionName=high State=DRAIN || fail "partition State=DRAIN refused"
sbatch -p high --wrap true 2>"$WORK/drain.err" && fail "a DRAIN partition took a new job"
grep -q "high is DRAIN and takes no new jobs" "$WORK/drain.err" || fail "DRAIN: $(cat "$WORK/drain.err")"
wait_until 30 finished "$waits" || fail "job $waits queued before the DRAIN did not run"
scontrol update PartitionName=high State=UP || fail "partition State=UP refused"
scontrol show partition high | grep -q "State=UP" || fail "$(scontrol show partition high)"
scontrol update PartitionName=nope State=UP 2>"$WORK/nope.err" && fail "an unknown partition was taken"
grep -q 'no partition "nope"' "$WORK/nope.err" || fail "unknown partition: $(cat "$WORK/nope.err")"
pass "partition State=DOWN holds its jobs (PartitionDown, why says so), DRAIN takes none, UP again"

# --- the GPU vocabulary, GPU types, -W, --begin, --deadline
gpus=$(sbatch --parsable -N 2 --gpus=8 --cpus-per-gpu=2 --mem-per-gpu=10G -t 5 --wrap true)
[ "$(field "$gpus" GpusPerNode) $(field "$gpus" CpusPerTask) $(field "$gpus" MemPerNode)" = "4 8 40960M" ] ||
  fail "--gpus=8 -N 2 --cpus-per-gpu=2 --mem-per-gpu=10G: $(scontrol show job "$gpus")"
typed=$(sbatch --parsable --gres=gpu:a100:4 -N 2 --wrap "sleep 1")
wait_until 30 finished "$typed" || fail "a100 job $typed did not end"
[ "$(field "$typed" GpuType)" = a100 ] || fail "GpuType: $(scontrol show job "$typed")"
[[ $(sacct -n -X -P -o NodeList -j "$typed") =~ ^node\[?0[5-8] ]] ||
  fail "gpu:a100 landed on $(sacct -n -X -P -o NodeList -j "$typed")"
sbatch --gres=gpu:v100:1 --wrap true 2>"$WORK/v100.err" && fail "gpu:v100 was accepted"
grep -q "no node has GPUs of type v100; types here: h100, a100" "$WORK/v100.err" ||
  fail "gpu:v100: $(cat "$WORK/v100.err")"
sbatch -W --wrap "exit 3" >/dev/null 2>&1
[ $? -eq 3 ] || fail "sbatch -W did not exit with the job's 3"
# srun --gpus-per-task inside a job: the step's GPUs per node from its ranks;
# a rank of two GPUs sees its own two (cuda:0 and cuda:1 are both its).
cat >"$WORK/gpus.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N 1 --ntasks-per-node=2 --gpus-per-node=4
srun --ntasks-per-node=2 --gpus-per-task=2 sh -c 'echo "local $SLURM_LOCALID sees $CUDA_VISIBLE_DEVICES"'
SCRIPT
pertask=$(sbatch --parsable -o "$WORK/gpus-%j.out" "$WORK/gpus.sh")
wait_until 30 finished "$pertask" || fail "--gpus-per-task job $pertask did not end"
seen=$(sed -n 's/^local [01] sees //p' "$WORK/gpus-$pertask.out" | tr ',' '\n')
[ "$(wc -l <<<"$seen")" = 4 ] && [ "$(sort -u <<<"$seen" | wc -l)" = 4 ] ||
  fail "srun --gpus-per-task=2: $(cat "$WORK/gpus-$pertask.out")"
begin=$(sbatch --parsable --begin=now+5 --wrap true)
waits_to_begin() { [ "$(squeue -h -j "$begin" -o %r)" = BeginTime ]; }
wait_until 4 waits_to_begin || fail "--begin: $(squeue -h -j "$begin" -o '%T %r')"
wait_until 30 finished "$begin" || fail "--begin job $begin did not run"
[ "$(job_state "$begin")" = COMPLETED ] || fail "--begin job is $(job_state "$begin")"
late=$(sbatch --parsable --deadline=now+60 -t 10 --wrap true)
wait_until 40 finished "$late" || fail "--deadline job $late was not ended"
[ "$(job_state "$late")" = CANCELLED ] || fail "--deadline job is $(job_state "$late")"
pass "GPU vocabulary and types, -W, --begin, --deadline"

# --- Snakemake's and dask-jobqueue's lines, as they issue them
# Snakemake 7's Slurm executor runs each rule as `srun -n1 --cpu-bind=q …`
# inside its job, and reads the state with sacct and scontrol; dask-jobqueue
# names each worker's log with %J.
cat >"$WORK/snakemake.sh" <<SCRIPT
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=2
#SBATCH -e $WORK/dask-worker-%J.err
srun -n1 --cpu-bind=q sh -c 'echo "rule ran as \$SLURM_PROCID of \$SLURM_NTASKS"'
echo "worker log" >&2
SCRIPT
snake=$(sbatch --parsable -o "$WORK/snakemake-%j.out" "$WORK/snakemake.sh")
snake_done() { [ "$(sacct -P -n --format=JobIdRaw,State -j "$snake" | head -n1)" = "$snake|COMPLETED" ]; }
wait_until 60 snake_done ||
  fail "snakemake job $snake: $(sacct -P -n --format=JobIdRaw,State -j "$snake"): $(cat "$WORK/snakemake-$snake.out")"
grep -qx "rule ran as 0 of 1" "$WORK/snakemake-$snake.out" ||
  fail "srun -n1 --cpu-bind=q: $(cat "$WORK/snakemake-$snake.out")"
grep -qx "worker log" "$WORK/dask-worker-$snake.err" 2>/dev/null ||
  fail "-e dask-worker-%J.err: $(ls "$WORK" | grep dask-worker)"
scontrol show jobid -dd "$snake" | grep -q "^JobId=$snake " ||
  fail "scontrol show jobid -dd: $(scontrol show jobid -dd "$snake" 2>&1)"
pass "Snakemake's srun -n1 --cpu-bind=q, sacct JobIdRaw and scontrol show jobid -dd; dask's %J"

# --- a stock template's --hint=nomultithread, and the job's start and end
# times that checkpointing scripts read
cat >"$WORK/times.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N 1 -t 10 --hint=nomultithread
echo "limit=$((SLURM_JOB_END_TIME - SLURM_JOB_START_TIME))"
SCRIPT
times=$(sbatch --parsable -o "$WORK/times-%j.out" "$WORK/times.sh")
times_done() { [ "$(sacct -P -n --format=JobIdRaw,State -j "$times" | head -n1)" = "$times|COMPLETED" ]; }
if wait_until 60 times_done && grep -qx "limit=600" "$WORK/times-$times.out"; then
  pass "--hint=nomultithread; SLURM_JOB_END_TIME is the start plus the time limit"
else
  fail "--hint or SLURM_JOB_*_TIME: $(cat "$WORK/times-$times.out" 2>&1)"
fi

# --- options: unknown ones named, and docs/slurm.md's table, row by row
sbatch --bogus --wrap true 2>"$WORK/bogus.err" && fail "--bogus was accepted"
grep -q -- "--bogus" "$WORK/bogus.err" || fail "--bogus: $(cat "$WORK/bogus.err")"
# The table's --reservation=r needs a reservation r (tomorrow, out of the way).
scontrol create reservation ReservationName=r StartTime=now+1day Duration=10 Nodes=node01 \
  Users=root >/dev/null || fail "scontrol create reservation r failed"
rows=0
while IFS='|' read -r _ option verdict _; do
  option=$(sed 's/^ *`//; s/` *$//' <<<"$option")
  verdict=$(tr -d ' ' <<<"$verdict")
  extra=()
  [[ $option == *per-gpu* ]] && extra=(--gpus-per-node=1)
  [[ $option == --segment=* ]] && extra=(-N 2)
  [[ $option == --spread-segments ]] && extra=(-N 2 --segment=1)
  rows=$((rows + 1))
  if sbatch --test-only "${extra[@]}" "$option" --wrap true >/dev/null 2>"$WORK/option.err"; then
    [ "$verdict" = refused ] && fail "$option was taken; docs/slurm.md says refused"
  else
    name=${option%%=*}
    if [ "$verdict" != refused ]; then
      fail "$option was refused; docs/slurm.md says $verdict: $(cat "$WORK/option.err")"
    elif ! grep -q -- "$name is not supported; " "$WORK/option.err"; then
      fail "$option refused without its alternative: $(cat "$WORK/option.err")"
    fi
  fi
done < <(sed -n '/^## sbatch, srun and salloc options/,/^## /p' "$ROOT/docs/slurm.md" |
  grep -E '^\| `-')
[ "$rows" -gt 90 ] || fail "docs/slurm.md's option table has $rows rows"
pass "docs/slurm.md's $rows options parse as it says"

# SBATCH_* variables: below the command line, above the script's #SBATCH.
printf '#!/bin/bash\n#SBATCH -t 99 -J script\ntrue\n' >"$WORK/env.sh"
out=$(SBATCH_ACCOUNT=research SBATCH_TIMELIMIT=7 SBATCH_JOB_NAME=fromenv \
  sbatch --test-only -J cli "$WORK/env.sh" 2>&1) || fail "sbatch with SBATCH_* failed: $out"
grep -q '^account *research$' <<<"$out" && grep -q '^time_limit *00:07:00$' <<<"$out" &&
  grep -q '^name *cli$' <<<"$out" || fail "SBATCH_* did not sit between the command line and #SBATCH: $out"
out=$(SBATCH_SIGNAL=FOO@30 sbatch --test-only --wrap true 2>&1) && fail "SBATCH_SIGNAL=FOO@30 was taken"
grep -q '^sbatch: error: SBATCH_SIGNAL="FOO@30": --signal' <<<"$out" || fail "a bad SBATCH_SIGNAL: $out"
pass "SBATCH_ACCOUNT and SBATCH_TIMELIMIT fill what the command line left, over the script's #SBATCH"

# Long options shortened as getopt takes them, sacct's shortened fields,
# squeue -r's line a task, --begin=noon-tomorrow, SLURM_TASK_PID.
arr=$(sbatch --parsable --arr=0-3 --hol -o /dev/null --wrap true) || fail "sbatch --arr= --hol was refused"
[ "$(squeue --job="$arr" -h -o %i | tr '\n' ' ')" = "${arr}_[0-3] " ] ||
  fail "squeue --job=: $(squeue --job="$arr" -h -o %i)"
[ "$(squeue --job="$arr" -r -h -o '%i %K' | tr '\n' ' ')" = "${arr}_0 0 ${arr}_1 1 ${arr}_2 2 ${arr}_3 3 " ] ||
  fail "squeue -r: $(squeue --job="$arr" -r -h -o '%i %K')"
out=$(squeue --s 2>&1) && fail "squeue --s was taken: $out"
grep -q "option '--s' is ambiguous; possibilities:" <<<"$out" || fail "squeue --s: $out"
[ "$(sacct -n -P -X -j "$snake" --format=jobidr,stat)" = "$snake|COMPLETED" ] ||
  fail "sacct --format=jobidr,stat: $(sacct -n -P -X -j "$snake" --format=jobidr,stat 2>&1)"
scancel "$arr"
later=$(sbatch --parsable --begin=noon-tomorrow --wrap true) || fail "--begin=noon-tomorrow was refused"
[ "$(squeue -h -j "$later" -o %r)" = BeginTime ] || fail "--begin=noon-tomorrow: $(squeue -h -j "$later" -o '%T %r')"
scancel "$later"
[ "$(srun -n1 sh -c '[ "$SLURM_TASK_PID" = "$$" ] && echo same')" = same ] ||
  fail "SLURM_TASK_PID is not the rank's pid: $(srun -n1 sh -c 'echo "$SLURM_TASK_PID $$"')"
pass "getopt's shortened options (--arr, --job=), sacct's shortened fields, squeue -r, noon-tomorrow, SLURM_TASK_PID"

# scontrol show job: an array's id shows each task, no id shows finished
# jobs too, -o puts each record on one line; srun -N-3 is one to three nodes.
[ "$(scontrol -o show job "$array" | grep -o ' ArrayJobId=[0-9]* ArrayTaskId=[0-9]*' | tr '\n' ' ')" = \
  " ArrayJobId=$array ArrayTaskId=0  ArrayJobId=$array ArrayTaskId=1 " ] ||
  fail "scontrol -o show job of array $array: $(scontrol -o show job "$array")"
# (grep reads it all: with -q it could leave scontrol writing into a closed
# pipe, which pipefail counts as a failure.)
scontrol show job | grep "^JobId=$plain " >/dev/null || fail "scontrol show job leaves out finished job $plain"
[ "$(scontrol show job "$plain" -o | wc -l)" = 1 ] || fail "scontrol show job -o: $(scontrol show job "$plain" -o)"
[ "$(srun -N-3 -n1 true && echo ran)" = ran ] || fail "srun -N-3 was refused"
# The submitter's ulimits reach the ranks (Slurm's PropagateResourceLimits).
limits=$(ulimit -S -n 512 && ulimit -S -c 0 && srun -n1 sh -c 'echo "$(ulimit -n) $(ulimit -c)"')
[ "$limits" = "512 0" ] || fail "srun's ranks did not get the submitter's ulimits: $limits"
stack=$(ulimit -S -n 512 && ulimit -S -s 4096 && srun -n1 --propagate=NOFILE sh -c 'echo "$(ulimit -n) $(ulimit -s)"')
[[ $stack == "512 "* && $stack != "512 4096" ]] || fail "--propagate=NOFILE passed on more or less: $stack"
out=$(sbatch --propagate=NOFILE,FOO --wrap true 2>&1) && fail "--propagate=FOO was taken"
grep -q '"FOO" is no limit' <<<"$out" || fail "--propagate=FOO: $out"
# --immediate: a job that cannot start at once is cancelled, saying why.
out=$(sbatch --immediate --begin=now+60 --wrap true 2>&1) && fail "sbatch --immediate of a later job succeeded: $out"
grep -q "did not start within 1 s (--immediate) and is cancelled; it waited for BeginTime" <<<"$out" ||
  fail "sbatch --immediate: $out"
out=$(salloc --immediate=2 --begin=now+60 true 2>&1) && fail "salloc --immediate=2 of a later job succeeded: $out"
grep -q "did not start within 2 s (--immediate)" <<<"$out" || fail "salloc --immediate=2: $out"
out=$(salloc -I --begin=now+60 true 2>&1) && fail "salloc -I of a later job succeeded: $out"
grep -q "did not start within 1 s (--immediate)" <<<"$out" || fail "salloc -I: $out"
[ "$(srun --immediate=10 -n1 echo at once)" = "at once" ] || fail "srun --immediate of a job that can start failed"
pass "scontrol show job ARRAY lists its tasks, without an id the finished jobs too; -o one line a record; srun -N-3; ulimits, --propagate; --immediate"

# scancel --signal=STOP shows STOPPED until CONT; scontrol show step.
held=$(sbatch --parsable -t 5 -o /dev/null --wrap 'srun -n1 sleep 300') || fail "sbatch of the step job failed"
step_runs() { scontrol show step "$held.0" 2>/dev/null | grep -q "State=RUNNING"; }
wait_until 30 step_runs || fail "step $held.0 never ran: $(scontrol show step "$held.0" 2>&1)"
scontrol -o show step | grep "^StepId=$held.0 UserId=0 .* State=RUNNING .* Tasks=1 " >/dev/null ||
  fail "scontrol -o show step: $(scontrol -o show step)"
scancel --signal=STOP "$held" || fail "scancel --signal=STOP failed"
[ "$(squeue -h -j "$held" -o '%T %t')" = "STOPPED ST" ] || fail "after SIGSTOP: $(squeue -h -j "$held" -o '%T %t')"
scontrol show job "$held" | grep -q "JobState=STOPPED" || fail "scontrol's JobState: $(scontrol show job "$held" | grep JobState)"
scancel --signal=CONT "$held" || fail "scancel --signal=CONT failed"
[ "$(squeue -h -j "$held" -o %T)" = RUNNING ] || fail "after SIGCONT: $(squeue -h -j "$held" -o %T)"
# scancel JOB.STEP: the step alone; the batch script (srun failed) ends.
scancel "$held.0" || fail "scancel $held.0 failed"
step_cancelled() { scontrol show step "$held.0" 2>/dev/null | grep -q "State=CANCELLED"; }
wait_until 30 step_cancelled || fail "step $held.0 after scancel: $(scontrol show step "$held.0" 2>&1)"
out=$(scancel "$held.batch" 2>&1) && fail "scancel $held.batch was taken: $out"
grep -q "is the job itself: cancel $held" <<<"$out" || fail "scancel $held.batch said: $out"
scancel "$held" 2>/dev/null
pass "scancel --signal=STOP shows STOPPED (ST) until CONT; scontrol show step; scancel JOB.STEP"

finish_test
