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
  # --gpu-bind=ordered (the default): each rank sees both of the job's GPUs
  # on its node, its own (GPU local rank) at position LOCAL_RANK.
  grep -Eq "cuda=0,1$" <<<"$line" || fail "rank $rank gpus: $line"
done
nodes=$(cat "$WORK"/out-"$id"-*.txt | sed -n 's/.* node=\([a-z0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ')
[ "$nodes" = "node01 node02 node03 node04 " ] || fail "ranks ran on: $nodes"
pass "gang job ran whole with the launch environment"

# --gpu-bind=none: every rank sees all of the job's GPUs on its node (for
# CUDA peer-to-peer between ranks); show job --ranks lists the plan while
# the ranks run, which they do until the test lets them go (a file appears;
# the 0.1 s sleep is their polling interval).
id=$(submit -N 2 --ntasks-per-node 2 --gpus-per-node 2 --gpu-bind=none -o "$WORK/none-%j-%t.txt" -- \
  sh -c 'echo "cuda=$CUDA_VISIBLE_DEVICES"; while [ ! -e "$0" ]; do sleep 0.1; done' "$WORK/go-none")
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
ranks_listed() { [ "$(cohort show job "$id" --ranks | grep -c '^[0-9]')" = 4 ]; }
wait_until 10 ranks_listed || fail "show job --ranks: $(cohort show job "$id" --ranks)"
ranks=$(cohort show job "$id" --ranks)
grep -Eq "^0 +node0[0-9] +0,1 " <<<"$ranks" || fail "rank 0's binding: $ranks"
grep -q '"cpus"' <<<"$(cohort show job "$id" --ranks --json)" || fail "--ranks --json has no cpus"
touch "$WORK/go-none"
wait_until 30 finished "$id" || fail "job $id did not finish"
for rank in 0 1 2 3; do
  grep -q "^cuda=0,1$" "$WORK/none-$id-$rank.txt" || fail "rank $rank with --gpu-bind=none: $(cat "$WORK/none-$id-$rank.txt")"
done
pass "--gpu-bind=none shows every rank the node's job GPUs; show job --ranks lists bindings"

out=$(cohort submit -N 1 --ntasks-per-node 4 --gpus-per-node 2 --gpu-bind=single:1 -- true 2>&1) &&
  fail "4 ranks on 2 GPUs with single:1 accepted"
grep -q "cannot be bound" <<<"$out" || fail "single:1 refusal: $out"
out=$(cohort submit -N 1 --gpu-bind=sometimes -- true 2>&1) && fail "--gpu-bind=sometimes accepted"
grep -q "gpu-bind" <<<"$out" || fail "bad --gpu-bind message: $out"
pass "bindings that cannot be made are refused at submit"
finish_test
