#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# AMD Instinct GPUs: a real agent whose node is the MI300X server of
# tests/data/hwloc/mi300x-nps4.xml (8 GPUs through ROCm SMI, an HCA behind
# each GPU's switch) registers its 8 GPUs as mi300x; a job asking
# --gres=gpu:mi300x:2 gets them through ROCR_VISIBLE_DEVICES, HIP counts
# them from 0, and each rank names its GPU's rail HCA.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/node.conf" <<CONF
ClusterName=amd
NodeName=mi01 CPUs=384 MemoryMB=1500000 Gres=gpu:mi300x:8
PartitionName=main Nodes=mi01 Default=YES MaxTime=10
CONF
echo "SwitchName=s1 Nodes=mi01" >"$WORK/topology.conf"
AGENT_HWLOC_XML_FILE="$ROOT/tests/data/hwloc/mi300x-nps4.xml"
AGENT_NODE=mi01 AGENT_HWLOC_XML="$AGENT_HWLOC_XML_FILE" \
  start_cluster "$WORK/node.conf" "$WORK/topology.conf"

# The node as the agent finds it, and as it registered.
"$BIN/daemons/agent/cohort-agent" --print-node --node mi01 --hwloc-xml "$AGENT_HWLOC_XML_FILE" |
  grep -q "Gres=gpu:mi300x:8 " || fail "the agent does not find 8 mi300x GPUs"
grep -q "agent_registered node=mi01 .* gpus=8 " "$WORK/controller.log" ||
  fail "mi01 did not register 8 GPUs: $(grep -m1 agent_registered "$WORK/controller.log")"
[ "$(cohort nodes -N --json | sed -n 's/.*"gpus": *\([0-9]*\),.*/\1/p')" = 8 ] ||
  fail "node mi01 does not have 8 GPUs: $(cohort nodes -N --json)"

id=$(submit --gres=gpu:mi300x:2 --ntasks-per-node=2 -c 1 --cpu-bind=none --mem-bind=none \
  -o "$WORK/out-%t" -- sh -c 'echo "$ROCR_VISIBLE_DEVICES|$HIP_VISIBLE_DEVICES|$CUDA_VISIBLE_DEVICES|$NCCL_IB_HCA|$LOCAL_RANK"')
[ -n "$id" ] || { fail "the job was refused"; finish_test; }
wait_until 60 finished "$id" || fail "job $id did not end"
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id is $(job_state "$id"): $(cohort show job "$id" | grep -i reason)"
for rank in 0 1; do
  IFS='|' read -r rocr hip cuda hca local <"$WORK/out-$rank" ||
    { fail "rank $rank wrote nothing"; continue; }
  # --gpu-bind=ordered: the rank's own GPU at position LOCAL_RANK.
  own=$(cut -d, -f$((local + 1)) <<<"$rocr")
  if [ "$hip" = 0,1 ] && [ "$cuda" = 0,1 ] && [ "$hca" = "=mlx5_$own" ] &&
    [ "$(tr ',' '\n' <<<"$rocr" | sort -n | paste -sd,)" = "0,1" ]; then
    pass "rank $rank: ROCR_VISIBLE_DEVICES=$rocr HIP_VISIBLE_DEVICES=$hip NCCL_IB_HCA=$hca"
  else
    fail "rank $rank: ROCR_VISIBLE_DEVICES=$rocr HIP_VISIBLE_DEVICES=$hip CUDA_VISIBLE_DEVICES=$cuda NCCL_IB_HCA=$hca"
  fi
done
finish_test
