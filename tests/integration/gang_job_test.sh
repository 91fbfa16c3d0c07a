#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A 4-node x 2-rank job runs whole on one leaf, every rank with the
# environment of the launch contract, and completes.
source "$(dirname "$0")/lib.sh"
start_cluster

id=$(submit -N 4 --ntasks-per-node 2 --gpus-per-node 2 -J envcheck -o "$WORK/out-%j-%t.txt" -- \
  sh -c 'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE noderank=$NODE_RANK node=$COHORT_NODENAME master=$MASTER_ADDR:$MASTER_PORT procid=$SLURM_PROCID nodeid=$SLURM_NODEID nodelist=$SLURM_JOB_NODELIST ntasks=$SLURM_NTASKS jobid=$SLURM_JOB_ID cuda=$CUDA_VISIBLE_DEVICES"')
[ -n "$id" ] || { fail "submit printed no job id"; finish_test; }
wait_until 30 finished "$id" || fail "job $id did not finish"
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id"), not COMPLETED"

for rank in 0 1 2 3 4 5 6 7; do
  file="$WORK/out-$id-$rank.txt"
  [ -f "$file" ] || { fail "no output of rank $rank"; continue; }
  line=$(cat "$file")
  grep -q "rank=$rank world=8 " <<<"$line" || fail "rank $rank: $line"
  grep -q "local=$((rank % 2))/2 noderank=$((rank / 2)) " <<<"$line" || fail "rank $rank local/node: $line"
  grep -q "procid=$rank nodeid=$((rank / 2)) " <<<"$line" || fail "rank $rank slurm ids: $line"
  grep -q "nodelist=node\[01-04\] ntasks=8 jobid=$id " <<<"$line" || fail "rank $rank nodelist: $line"
  grep -q "master=127.0.0.1:[0-9]" <<<"$line" || fail "rank $rank master: $line"
  grep -Eq "cuda=[0-9],[0-9]$" <<<"$line" || fail "rank $rank gpus: $line"
done
nodes=$(cat "$WORK"/out-"$id"-*.txt | sed -n 's/.* node=\([a-z0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ')
[ "$nodes" = "node01 node02 node03 node04 " ] || fail "ranks ran on: $nodes"
pass "gang job ran whole with the launch environment"
finish_test
