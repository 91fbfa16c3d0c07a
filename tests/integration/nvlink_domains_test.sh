#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Discovered NVLink domains: two real agents on this host, each loading a
# stand-in for NVIDIA's NVML (built by the tests) that answers recorded
# fabric values. topology.conf puts both nodes in one block; their GPUs
# report two cliques, and the controller warns that the block is split.
# Then both report one clique, and nothing is said.
source "$(dirname "$0")/lib.sh"
STANDIN="$BIN/tests/unit/libcohort_nvml_standin.so"
[ -f "$STANDIN" ] || { fail "no NVML stand-in at $STANDIN: the build makes it"; finish_test; }
cat >"$WORK/node.conf" <<CONF
ClusterName=domains
NodeName=node[01-02] CPUs=1 MemoryMB=1000 Gpus=2
PartitionName=main Nodes=ALL Default=YES MaxTime=10
CONF
printf 'SwitchName=s1 Nodes=node[01-02]\nBlockName=rack1 Nodes=node[01-02]\n' >"$WORK/topology.conf"
uuid=00112233445566778899aabbccddeeff
printf '%s 1\n%s 1\n' "$uuid" "$uuid" >"$WORK/fabric-01"
printf '%s 2\n%s 2\n' "$uuid" "$uuid" >"$WORK/fabric-02"
write_cluster_conf "$WORK/node.conf" "$WORK/topology.conf"
start_controller 0
export COHORT_CONTROLLER="unix:$WORK/state/cohort.sock"
# One real agent per node, each with its own spool and recorded fabric; its
# pid in AGENT (set here, not in a subshell, so that cleanup stops it).
start_node_agent() {
  mkdir -p "$WORK/spool-$1"
  COHORT_NVML_LIBRARY="$STANDIN" COHORT_NVML_STANDIN="$WORK/fabric-$1" \
    "$BIN/daemons/agent/cohort-agent" -c "$WORK/cohort.conf" --node "node$1" \
    --controller "127.0.0.1:$(cat "$WORK/port")" --spool "$WORK/spool-$1" \
    >>"$WORK/agent-$1.log" 2>&1 &
  AGENT=$!
  PIDS+=("$AGENT")
}
start_node_agent 01
a=$AGENT
start_node_agent 02
b=$AGENT
wait_until 30 all_nodes_up || fail "nodes did not register: $(cohort nodes)"
warned() { grep -q "nvlink_domain_mismatch node=node0[12] .*are in block rack1 of topology.conf but report different NVLink domains" "$WORK/controller.log"; }
if wait_until 10 warned; then
  pass "a block whose nodes report two NVLink domains is named: $(grep -m1 -o 'node0. and node0. are in block rack1[^"]*' "$WORK/controller.log")"
else
  fail "no warning of the split block: $(grep -i nvlink "$WORK/controller.log" | head -3)"
fi

# node02's fabric mended: it registers again and nothing is said.
live=$(cohort config check --live 2>&1) && fail "config check --live passed a split block: $live"
grep -q "^error: nvlink: node0. and node0. are in block rack1 of topology.conf but report different NVLink domains" <<<"$live" ||
  fail "config check --live did not name the split block: $live"
grep -q "disagree with the running controller's blocks in 1 place; fix the BlockName lines" <<<"$live" ||
  fail "config check --live gave no fix: $live"
pass "cohort config check --live names the split block and exits 1"

kill "$b"; wait "$b" 2>/dev/null
printf '%s 1\n%s 1\n' "$uuid" "$uuid" >"$WORK/fabric-02"
before=$(grep -c nvlink_domain_mismatch "$WORK/controller.log")
start_node_agent 02
b=$AGENT
registered_again() { [ "$(grep -c 'agent_registered node=node02' "$WORK/controller.log")" -ge 2 ]; }
wait_until 30 registered_again || fail "node02 did not register again"
[ "$(grep -c nvlink_domain_mismatch "$WORK/controller.log")" = "$before" ] ||
  fail "a mended block still warns: $(grep nvlink_domain_mismatch "$WORK/controller.log" | tail -1)"
live=$(cohort config check -c "$WORK/cohort.conf" --live 2>&1) ||
  fail "config check --live failed on a mended block: $live"
grep -q "^nvlink     2 nodes of the running controller report NVLink domains; they agree with the blocks" <<<"$live" ||
  fail "config check --live on a mended block: $live"
pass "nodes of one block reporting one NVLink domain draw no warning, and config check --live agrees"

# TopologyBlocks=auto: the blocks are the domains the nodes report. The
# controller writes them to its StateDir and restarts in place to use them.
printf 'SwitchName=s1 Nodes=node[01-02]\n' >"$WORK/topology.conf"
echo "TopologyBlocks=auto" >>"$WORK/cohort.conf"
kill -HUP "$CONTROLLER_PID"
auto_ok=1
auto_fail() { fail "$1"; auto_ok=0; }
# Started three times: at first, after SIGHUP, and once the blocks were written.
applied() { [ "$(grep -c controller_started "$WORK/controller.log")" -ge 3 ]; }
wait_until 40 applied ||
  auto_fail "the reported domains were not applied: $(grep -E 'nvlink_blocks|reconfigure' "$WORK/controller.log" | tail -3)"
grep -q "nvlink_blocks_changed blocks=1 nodes=2 file=$WORK/state/nvlink-blocks.conf" "$WORK/controller.log" ||
  auto_fail "no nvlink_blocks_changed line: $(grep nvlink_blocks "$WORK/controller.log")"
wait_until 30 all_nodes_up || auto_fail "nodes did not come back: $(cohort nodes)"
check=$(cohort config check -c "$WORK/cohort.conf" 2>&1) || auto_fail "config check: $check"
grep -q "^blocks     1 (nvl-00112233-1): 1 x 2 nodes" <<<"$check" ||
  auto_fail "config check does not show the reported block: $check"
job=$(submit -N 2 --segment=2 -o /dev/null -- true)
wait_until 30 finished "$job" || auto_fail "job $job did not run: $(cohort why "$job")"
cohort show job "$job" | grep -q "^   Blocks=nvl-00112233-1 " ||
  auto_fail "job $job is not in the reported block: $(cohort show job "$job" | grep -i block)"
[ "$auto_ok" = 1 ] &&
  pass "TopologyBlocks=auto: the nodes' one NVLink domain became block nvl-00112233-1, and a --segment=2 job ran in it"
finish_test
