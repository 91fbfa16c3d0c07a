#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The offline operator commands as a user types them: config check, topology
# show, hostlist and place; and the checks online commands make before
# calling the controller; and cohort-agent --print-node on an hwloc file.
# Usage: offline_cli_test.sh COHORT_BINARY REPO_ROOT [AGENT_BINARY]
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

# Slurm 25.05's topology.yaml gives the same placement, and beside
# cohort.conf it is read before topology.conf.
expect_ok "place yaml" "$cohort" place -t "$data/topologies/gb200-nvl72.yaml" -N 18 --gpus-per-node 4
expect_output "place yaml" "spans 1 block: nvl72-1"
yaml_dir=$(mktemp -d)
trap 'rm -rf "$yaml_dir"' EXIT
printf 'NodeName=gb[001-144] Gpus=4\nPartitionName=all Nodes=gb[001-144] Default=YES\n' \
  >"$yaml_dir/cohort.conf"
cp "$data/topologies/gb200-nvl72.yaml" "$yaml_dir/topology.yaml"
printf 'SwitchName=old Nodes=gb[001-144]\n' >"$yaml_dir/topology.conf"
expect_ok "check yaml beside" "$cohort" config check -c "$yaml_dir/cohort.conf"
expect_output "check yaml beside" "topology.conf.*warning: topology.conf is not read: topology.yaml beside it is"
expect_output "check yaml blocks" "blocks +8"
printf -- '- topology: t\n  tre: {}\n' >"$yaml_dir/topology.yaml"
expect_exit 1 "broken yaml" "$cohort" config check -c "$yaml_dir/cohort.conf"
expect_output "broken yaml" 'topology.yaml:2:3: error: unknown key "tre" in a topology'

# history: every option is checked before the controller is called, so a bad
# one is refused (exit 2) even with no controller at the address given.
nowhere=(--controller unix:/nonexistent/cohort.sock)
expect_ok "history help" "$cohort" history --help
expect_output "history help" "--since,--starttime"
expect_output "history help" "--parsable"
expect_exit 2 "history bad state" "$cohort" history -s CD,DONE "${nowhere[@]}"
expect_output "history bad state" '^cohort: --state: no state "DONE"; states: COMPLETED \(CD\), FAILED \(F\), CANCELLED \(CA\), TIMEOUT \(TO\), NODE_FAIL \(NF\)$'
expect_exit 2 "history running state" "$cohort" history --state r "${nowhere[@]}"
expect_output "history running state" "RUNNING jobs are not in the history"
expect_exit 2 "history bad since" "$cohort" history -S yesterday "${nowhere[@]}"
expect_output "history bad since" '^cohort: --since: cannot read "yesterday" as a time; write YYYY-MM-DD, YYYY-MM-DDTHH:MM\[:SS\]'
expect_exit 2 "history bad endtime" "$cohort" history --endtime 2024-02-30 "${nowhere[@]}"
expect_output "history bad endtime" "^cohort: --until: 2024-02-30: no such date or time of day"
expect_exit 2 "history backwards" "$cohort" history -S now -E now-1hour "${nowhere[@]}"
expect_output "history backwards" "--since now is not before --until now-1hour"
expect_exit 2 "history bad jobs" "$cohort" history -j 12,x "${nowhere[@]}"
expect_output "history bad jobs" '"x" is not a job id'
# Good options get as far as the (missing) controller: exit 1.
expect_exit 1 "history no controller" "$cohort" history -a -s cd,F -S now-2days -E now --limit 5 "${nowhere[@]}"
expect_output "history no controller" "cannot reach the controller at unix:/nonexistent/cohort.sock"

# cohort-agent --print-node reads a node from an hwloc file: a NodeName line
# that cohort.conf takes as it is, then the layout as comments.
agent=${3:-}
if [ -n "$agent" ]; then
  dgx=$data/hwloc/dgx-h100-like.xml
  expect_ok "print node" "$agent" --print-node --node gpu001 --hwloc-xml "$dgx"
  expect_output "print node line" "^NodeName=gpu001 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 MemoryMB=2097152 Gres=gpu:h100:8 GpuNuma=0,0,0,0,1,1,1,1$"
  expect_output "print node numa" "^# numa 1: 1048576 MB, 56 cores, cpus 112-223, gpus 4,5,6,7, nics mlx5_4,mlx5_5,mlx5_6,mlx5_7$"
  expect_output "print node gpu" "^# gpu 0: nvml0 pci 0000:18:00.0 numa 0 rail mlx5_0$"
  node_conf=$(mktemp)
  printf '%s\nPartitionName=p Nodes=ALL\n' "$out" > "$node_conf"
  expect_ok "print node parses" "$cohort" config check -c "$node_conf"
  rm -f "$node_conf"
  expect_exit 1 "print node missing file" "$agent" --print-node --hwloc-xml "$data/hwloc/none.xml"
  expect_output "print node missing file" "--hwloc-xml: hwloc topology .*none.xml: no such file"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "offline cli: all checks passed"
