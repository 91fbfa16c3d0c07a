#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The rack-scale NVLink test, on the shipped GB200 NVL72 layout (144 nodes,
# eight blocks of 18 under four IB leaves): four --segment=18 jobs each land
# in one block, with node ranks in topology order and SLURM_TOPOLOGY_ADDR;
# `cohort place` gives the live controller's answer for the same state; a
# job asking for more segments than whole blocks remain waits, and
# `cohort why` names the blocks; BlockSizes keeps a job in one aggregate.
source "$(dirname "$0")/lib.sh"
EXTRA_CONF="" start_cluster "$ROOT/tests/data/clusters/gb200-nvl72.conf" \
  "$ROOT/tests/data/topologies/gb200-nvl72.conf"

mkdir -p "$WORK/out" && chmod 1777 "$WORK/out"
rank_line='echo "$SLURM_NODEID $COHORT_NODENAME $SLURM_TOPOLOGY_ADDR $SLURM_TOPOLOGY_ADDR_PATTERN $SLURM_JOB_NODELIST" > '"$WORK"'/out/$SLURM_JOB_ID-$SLURM_NODEID; sleep 300'
running() { state_is "$1" RUNNING; }
nodes_of() { cohort show job "$1" --json | sed -n 's/^  "nodes": "\(.*\)",$/\1/p'; }

ids=()
for i in 1 2 3; do
  id=$(submit -N 18 --segment=18 --gpus-per-node 4 -o /dev/null -- sh -c "$rank_line")
  [ -n "$id" ] || { fail "submit $i gave no id"; finish_test; }
  wait_until 30 running "$id" || fail "job $id did not start: $(job_reason "$id")"
  ids+=("$id")
done
# The controller's next choice, asked offline for the same busy nodes.
busy=$(for id in "${ids[@]}"; do nodes_of "$id"; done | paste -sd, -)
offline=$(cohort place -c "$WORK/cohort.conf" -N 18 --segment 18 --gpus-per-node 4 --busy "$busy" |
  sed -n 's/^placed 18 nodes: //p')
id=$(submit -N 18 --segment=18 --gpus-per-node 4 -o /dev/null -- sh -c "$rank_line")
wait_until 30 running "$id" || fail "job $id did not start: $(job_reason "$id")"
ids+=("$id")
[ -n "$offline" ] && [ "$offline" = "$(nodes_of "$id")" ] ||
  fail "cohort place said '$offline', the controller placed job $id on '$(nodes_of "$id")'"

blocks_used=()
for id in "${ids[@]}"; do
  show=$(cohort show job "$id")
  placement=$(sed -n 's/^   Placement=//p' <<<"$show")
  grep -Eq '^1 segment of 18 nodes \(gb\[[0-9]{3}-[0-9]{3}\] in nvl72-[1-8]\); blocks nvl72-[1-8]; leaves ib-leaf[1-4]; at most 2 hops \(under ib-leaf[1-4]\)$' <<<"$placement" ||
    fail "job $id: Placement=$placement"
  blocks_used+=("$(sed -n 's/^   Blocks=\([^ ]*\) .*/\1/p' <<<"$show")")
  scontrol=$("$BIN/cli/slurm/scontrol" show job "$id" 2>&1)
  grep -q "Segment=18 " <<<"$scontrol" || fail "scontrol show job $id has no Segment=18: $scontrol"
  json=$(cohort show job "$id" --json)
  grep -q '"worst_hops": 2' <<<"$json" || fail "show job $id --json has no worst_hops: $json"
done
[ "$(printf '%s\n' "${blocks_used[@]}" | sort -u | wc -l)" -eq 4 ] ||
  fail "four jobs did not take four blocks: ${blocks_used[*]}"
pass "four --segment=18 jobs each in a block of their own: ${blocks_used[*]}"

# Rank 0's line: its node is the first of the nodelist, its address the tree's.
first=${ids[0]}
have_rank_files() { [ "$(ls "$WORK/out" | grep -c "^$first-")" -eq 18 ]; }
wait_until 30 have_rank_files || fail "job $first wrote $(ls "$WORK/out" | grep -c "^$first-") rank files"
read -r rank node addr pattern nodelist <"$WORK/out/$first-0"
expanded_first=$(cohort hostlist expand "$nodelist" | head -1)
[ "$rank" = 0 ] && [ "$node" = "$expanded_first" ] ||
  fail "node rank 0 runs on $node, the nodelist $nodelist starts with $expanded_first"
if [[ "$addr" == ib-spine.ib-leaf*.nvl72-*."$node" ]] && [ "$pattern" = switch.switch.block.node ]; then
  pass "node rank 0 is the nodelist's first node, SLURM_TOPOLOGY_ADDR=$addr"
else
  fail "SLURM_TOPOLOGY_ADDR=$addr SLURM_TOPOLOGY_ADDR_PATTERN=$pattern on $node"
fi

# Four blocks left: five segments cannot be placed, and why names the blocks.
big=$(submit -N 90 --segment=18 --gpus-per-node 4 -o /dev/null -- true)
wait_until 20 considered "$big" || fail "job $big was not considered"
why=$(cohort why "$big")
if grep -q "whole segments of 18 free: nvl72-5, nvl72-6, nvl72-7, nvl72-8 (4 of the 5 needed)" <<<"$why" &&
  grep -q "with -N 72 it could start now" <<<"$why"; then
  pass "a job of five segments waits on four free blocks: $(grep -m1 nvl72 <<<"$why")"
else
  fail "why $big does not name the blocks: $why"
fi
cohort cancel "$big" "${ids[@]}" || fail "cancel failed"

# --spread-segments puts each segment in a block of its own.
spread=$(submit -N 8 --segment=4 --spread-segments -o /dev/null -- sleep 300)
wait_until 30 running "$spread" || fail "job $spread did not start: $(job_reason "$spread")"
blocks=$(cohort show job "$spread" | sed -n 's/^   Blocks=\([^ ]*\) .*/\1/p')
[ "$(tr ',' '\n' <<<"$blocks" | wc -l)" -eq 2 ] || fail "spread job $spread is in blocks '$blocks'"
out=$(cohort submit -N 8 --spread-segments -- true 2>&1) &&
  fail "--spread-segments without --segment was accepted"
grep -q "needs --segment" <<<"$out" || fail "--spread-segments alone said: $out"
pass "--spread-segments: two segments in blocks $blocks"
cohort cancel "$spread"

# --exclusive=topo: 4 nodes hold their whole block; another job asking for
# one of the other 14 nodes waits until the holder ends.
topo=$(submit -N 4 --exclusive=topo -o /dev/null -- sleep 300)
wait_until 30 running "$topo" || fail "job $topo did not start: $(job_reason "$topo")"
block=$(cohort show job "$topo" | sed -n 's/^   Blocks=\([^ ]*\) .*/\1/p')
"$BIN/cli/slurm/scontrol" show job "$topo" | grep -q "Exclusive=TOPO" ||
  fail "scontrol show job $topo does not say Exclusive=TOPO"
members=$(sed -n "s/^BlockName=$block Nodes=\(.*\)$/\1/p" "$ROOT/tests/data/topologies/gb200-nvl72.conf")
last=$(cohort hostlist expand "$members" | tail -1)
guest=$(submit -N 1 -w "$last" -o /dev/null -- true)
wait_until 20 considered "$guest" || fail "job $guest was not considered"
reason=$(cohort why "$guest")
grep -q "is in block $block, which another job holds whole (--exclusive=topo)" <<<"$reason" ||
  fail "job $guest on $last in held block $block: $reason"
cohort cancel "$topo"
wait_until 30 finished "$guest" || fail "job $guest did not run once $topo ended: $(job_reason "$guest")"
pass "--exclusive=topo: job $topo held block $block; job $guest on $last waited for it"
finish_test
