#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Isolation between jobs on one node: a real agent for this host (node01,
# its own cores, and two GPUs whose device files the test makes with mknod)
# runs two one-GPU, one-CPU jobs at once. Each job's cgroups hold it to
# cores the other does not have (a rank cannot move onto the other's), and
# let it open its own GPU's device file but not the other's; with
# SwitchType=switch/nvidia_imex, its own IMEX channel's file (stand-ins
# 240:0-3) and no other. The files are
# character devices 195:0 and 195:1 (NVIDIA's major): with no driver
# behind them, opening one that is allowed fails with ENXIO ("No such device
# or address"), one the cgroup denies with EPERM ("Operation not
# permitted").
#
# Needs root (cgroups, mknod) and cgroup v1's cpuset and devices
# hierarchies, or cgroup v2 with the cpuset controller and eBPF device
# filters; says why and exits 77 (skipped) otherwise.
source "$(dirname "$0")/lib.sh"

skip() {
  echo "skipped: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "isolation needs the agent to run as root"
CPUS=$(nproc)
[ "$CPUS" -ge 2 ] || skip "two jobs on distinct cores need 2 CPUs; this host has $CPUS"

mkdir -p "$WORK/dev"
mknod -m 666 "$WORK/dev/nvidia0" c 195 0 && mknod -m 666 "$WORK/dev/nvidia1" c 195 1 ||
  skip "mknod cannot make device files in $WORK"
# IMEX channels: 240 is a major reserved for local use, with no driver here.
mkdir -p "$WORK/dev/imex"
for ch in 0 1 2 3; do mknod -m 666 "$WORK/dev/imex/channel$ch" c 240 "$ch"; done
cat >"$WORK/node.conf" <<CONF
ClusterName=isolation
SwitchType=switch/nvidia_imex
SwitchParameters=imex_channel_count=4,imex_dev_major=240,imex_channel_dir=$WORK/dev/imex
NodeName=node01 CPUs=$CPUS MemoryMB=1000 Gpus=2 GpuFiles=$WORK/dev/nvidia[0-1]
PartitionName=main Nodes=node01 Default=YES
CONF
echo "SwitchName=s1 Nodes=node01" >"$WORK/topology.conf"
AGENT_NODE=node01 start_cluster "$WORK/node.conf" "$WORK/topology.conf"

grep -q "cgroups_enabled" "$WORK/agent.log" ||
  skip "the agent has no cgroups: $(grep -o 'cgroups unavailable.*' "$WORK/agent.log" | head -1)"
version=$(sed -n 's/.*cgroups_enabled version=\([0-9]\).*/\1/p' "$WORK/agent.log" | head -1)

# What a job sees: its cgroup's cores, whether it may run on the other
# job's core, and what opening each GPU's file says.
cat >"$WORK/probe.sh" <<'PROBE'
#!/bin/sh
work=$1
if [ -d /sys/fs/cgroup/cpuset ]; then
  echo "cpuset $(cat "/sys/fs/cgroup/cpuset$(sed -n 's/^[0-9]*:cpuset://p' /proc/self/cgroup)/cpuset.cpus")"
else
  echo "cpuset $(cat "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/cpuset.cpus.effective")"
fi
echo "gpu $SLURM_JOB_GPUS"
echo "cuda $CUDA_VISIBLE_DEVICES"
for cpu in 0 1; do
  if taskset -c -p "$cpu" $$ >/dev/null 2>&1; then echo "cpu$cpu allowed"; else echo "cpu$cpu refused"; fi
done
for gpu in 0 1; do
  echo "nvidia$gpu $(cat "$work/dev/nvidia$gpu" 2>&1 >/dev/null | sed 's/.*: //')"
done
echo "imex $NVIDIA_IMEX_CHANNELS"
for ch in 0 1 2 3; do
  echo "channel$ch $(cat "$work/dev/imex/channel$ch" 2>&1 >/dev/null | sed 's/.*: //')"
done
while [ ! -e "$work/go" ]; do sleep 0.1; done
PROBE
chmod 755 "$WORK/probe.sh"

a=$(submit -G 1 -c 1 -o "$WORK/a.out" -- "$WORK/probe.sh" "$WORK")
b=$(submit -G 1 -c 1 -o "$WORK/b.out" -- "$WORK/probe.sh" "$WORK")
both_running() { state_is "$a" RUNNING && state_is "$b" RUNNING; }
wait_until 30 both_running || fail "jobs $a and $b did not run together: $(job_state "$a") $(job_state "$b")"
both_probed() { grep -q nvidia1 "$WORK/a.out" && grep -q nvidia1 "$WORK/b.out"; }
wait_until 30 both_probed || fail "the jobs did not report: $(cat "$WORK/a.out" "$WORK/b.out")"
touch "$WORK/go"
wait_until 30 finished "$a" && wait_until 30 finished "$b" || fail "jobs did not end"
echo "--- job $a"; cat "$WORK/a.out"
echo "--- job $b"; cat "$WORK/b.out"

field() { sed -n "s/^$2 //p" "$WORK/$1.out"; }
other() { if [ "$1" = 0 ]; then echo 1; else echo 0; fi; }
cpus_a=$(field a cpuset)
cpus_b=$(field b cpuset)
[ -n "$cpus_a" ] && [ -n "$cpus_b" ] && [ "$cpus_a" != "$cpus_b" ] ||
  fail "the jobs' cpusets are not distinct cores: '$cpus_a' and '$cpus_b'"
for job in a b; do
  own=$(field $job cpuset)
  other=$(other "$own")
  case "$own" in 0 | 1) ;; *) fail "job $job's cpuset is '$own', not one core"; continue ;; esac
  [ "$(field $job "cpu$own")" = allowed ] || fail "job $job may not run on its own core $own"
  [ "$(field $job "cpu$other")" = refused ] || fail "job $job could move onto the other job's core $other"
done
pass "each job's cgroup holds it to its own core (cgroup v$version)"

if grep -q 'cgroups_enabled.* devices="limited' "$WORK/agent.log"; then
  gpu_a=$(field a gpu)
  gpu_b=$(field b gpu)
  [ -n "$gpu_a" ] && [ -n "$gpu_b" ] && [ "$gpu_a" != "$gpu_b" ] ||
    fail "the jobs did not get distinct GPUs: '$gpu_a' and '$gpu_b'"
  for job in a b; do
    own=$(field $job gpu)
    other=$(other "$own")
    field $job "nvidia$own" | grep -q "No such device or address" ||
      fail "job $job could not open its own GPU $own: $(field $job "nvidia$own")"
    field $job "nvidia$other" | grep -q "Operation not permitted" ||
      fail "job $job opened the other job's GPU $other: $(field $job "nvidia$other")"
  done
  # CUDA sees only the GPU it can open, as its device 0.
  [ "$(field a cuda)" = 0 ] && [ "$(field b cuda)" = 0 ] ||
    fail "under the device cgroup CUDA_VISIBLE_DEVICES should count from 0: a '$(field a cuda)', b '$(field b cuda)'"
  pass "each job opens its own GPU's device file and not the other's, as CUDA's device 0 (cgroup v$version)"
  imex_a=$(field a imex)
  imex_b=$(field b imex)
  [ -n "$imex_a" ] && [ -n "$imex_b" ] && [ "$imex_a" != "$imex_b" ] ||
    fail "the jobs did not get distinct IMEX channels: '$imex_a' and '$imex_b'"
  for job in a b; do
    own=$(field $job imex)
    for ch in 0 1 2 3; do
      if [ "$ch" = "$own" ]; then
        field $job "channel$ch" | grep -q "No such device or address" ||
          fail "job $job could not open its own IMEX channel $ch: $(field $job "channel$ch")"
      else
        field $job "channel$ch" | grep -q "Operation not permitted" ||
          fail "job $job opened IMEX channel $ch, not its own $own: $(field $job "channel$ch")"
      fi
    done
  done
  cohort show job "$a" | grep -q "^   ImexChannels=$imex_a$" ||
    fail "show job $a does not say ImexChannels=$imex_a: $(cohort show job "$a")"
  pass "each job opens its own IMEX channel's file ($imex_a, $imex_b) and no other"
else
  echo "skipped: device isolation: $(grep -o 'devices=.*' "$WORK/agent.log" | head -1)"
fi

# A job started once the others ended gets a free core again: nothing is
# held past its launch.
c=$(submit -G 2 -c "$CPUS" -o "$WORK/c.out" -- sh -c 'grep Cpus_allowed_list /proc/self/status')
wait_until 30 finished "$c" || fail "job $c did not finish"
[ "$(job_state "$c")" = COMPLETED ] || fail "job $c taking every core: $(job_state "$c") $(cat "$WORK/c.out")"
pass "a job granted every CPU runs once the others end"
finish_test
