#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The offline operator commands as a user types them: config check, topology
# show, hostlist and place. Usage: offline_cli_test.sh COHORT_BINARY REPO_ROOT
set -uo pipefail
cohort=$1
root=$2
data=$root/tests/data
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_ok NAME CMD...: the command exits 0.
expect_ok() { local name=$1; shift; out=$("$@" 2>&1) || fail "$name: exit $? from: $*"$'\n'"$out"; }
# expect_exit CODE NAME CMD...
expect_exit() {
  local code=$1 name=$2; shift 2
  out=$("$@" 2>&1); local rc=$?
  [ "$rc" -eq "$code" ] || fail "$name: exit $rc, wanted $code, from: $*"$'\n'"$out"
}
# expect_output NAME PATTERN: the last output matches the extended regex.
expect_output() { grep -Eq -- "$2" <<<"$out" || fail "$1: output lacks /$2/:"$'\n'"$out"; }

# Every shipped topology and the example configuration pass.
for f in "$data"/topologies/*.conf; do
  expect_ok "check $(basename "$f")" "$cohort" config check -t "$f"
  expect_output "check $(basename "$f")" "^nodes +[0-9]+"
done
expect_ok "check example" "$cohort" config check -c "$root/etc/cohort/cohort.conf"
expect_output "example summary" "switches +11 \(level 0: 8, level 1: 2, level 2: 1\), 1 tree"
expect_output "example partitions" "partition +train \(default\): 64 nodes"
expect_ok "check example with -t" "$cohort" config check -c "$root/etc/cohort/cohort.conf" \
  -t "$root/etc/cohort/topology.conf"

# Broken files: exit 1 and every error listed with its line.
expect_exit 1 "broken config" "$cohort" config check -c "$data/broken/cohort.conf" -t "$data/topologies/small-2leaf.conf"
expect_output "broken config port" "cohort.conf:3:16: error: ControllerPort must be a non-negative integer"
expect_output "broken config gpu" "cohort.conf:4:31: error: unknown key \"Gpu\".*"
expect_output "broken config hint" "hint: did you mean Gpus\?"
expect_output "broken config hostlist" "cohort.conf:5:"
expect_output "broken config time" "cohort.conf:6:[0-9]+: error: MaxTime"
expect_output "broken config key" "cohort.conf:7:1: error: unknown key \"PartitionNmae\""
expect_exit 1 "broken topology" "$cohort" config check -t "$data/broken/topology.conf"
expect_output "two leaves" "topology.conf:3:[0-9]+: error: node node4 is under two leaf switches \(leaf1, leaf2\)"
expect_output "undefined switch" "topology.conf:4:[0-9]+: error: switch spine refers to undefined switches: leaf3"
expect_output "cycle" "error: switches form a cycle: loop1 -> loop2 -> loop1"
expect_output "unknown key" "topology.conf:7:[0-9]+: error: unknown key \"Speed\""
expect_output "error count" "^[0-9]+ errors; nothing was changed"
expect_exit 2 "check needs a file" "$cohort" config check
expect_exit 1 "missing file" "$cohort" config check -t "$data/does-not-exist.conf"
expect_output "missing file" "cannot read .*does-not-exist.conf"

# topology show prints the tree with node counts.
expect_ok "show" "$cohort" topology show -t "$data/topologies/fat-tree-1024.conf"
expect_output "show core" "^[a-z0-9-]+ +level 2, 1024 nodes"
expect_output "show leaf" "leaf00 +level 0, 32 nodes: gpu\[0001-0032\]"

# hostlist expand and compress.
expect_ok "expand" "$cohort" hostlist expand 'rack[1-2]-n[01-02]'
[ "$out" = $'rack1-n01\nrack1-n02\nrack2-n01\nrack2-n02' ] || fail "expand: got $out"
expect_ok "compress" "$cohort" hostlist compress gpu003 gpu001 gpu002 gpu002 gpu010
[ "$out" = "gpu[001-003,010]" ] || fail "compress: got $out"
expect_exit 1 "bad hostlist" "$cohort" hostlist expand 'gpu[3-1]'
expect_output "bad hostlist position" "position 5"

# place: the acceptance cases of the small tree.
small=$data/topologies/small-2leaf.conf
expect_ok "place 4" "$cohort" place -t "$small" -N 4
expect_output "place 4 leaf" "spans 1 leaf switch: leaf0"
expect_ok "place 4 busy" "$cohort" place -t "$small" -N 4 --busy 'node[1-2]'
expect_output "place 4 busy leaf" "spans 1 leaf switch: leaf1"
expect_output "place 4 busy nodes" "placed 4 nodes: node\[5-8\]"
expect_exit 1 "place 9" "$cohort" place -t "$small" -N 9
expect_output "place 9 reason" "^infeasible: partition all has 8 nodes; the job asks for 9"
expect_exit 1 "place busy" "$cohort" place -t "$small" -N 4 --busy 'node[1-3,5-6]'
expect_output "place busy reason" "^busy: 4 nodes needed, 3 of 8 free now"
expect_ok "place json" "$cohort" place -t "$small" -N 2 --gpus-per-node 2 --json
expect_output "place json" '"outcome": "placed"'
expect_exit 2 "place bad N" "$cohort" place -t "$small" -N 0
expect_output "place bad N" "nodes is 0"
expect_exit 2 "place unknown node" "$cohort" place -t "$small" -N 1 --busy 'gpu1'
expect_output "place unknown node" "no such nodes: gpu1"
expect_ok "place blocks" "$cohort" place -t "$data/topologies/gb200-nvl72.conf" -N 18 --gpus-per-node 4
expect_output "place blocks" "spans 1 block: nvl72-1"

if [ "$failures" -gt 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "offline cli: all checks passed"
