#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A cluster of separate hosts on one machine (scripts/netns-cluster.sh): a
# controller, a login host and five nodes, each with its own network, name
# and munged, on a bridge of 198.18.0.0/24 inside namespaces. From the login
# host: a 4-node step streams its output back and its ranks meet at the
# first node's own address, PyTorch DDP among them; a node marked not
# responding, then a node's cable pulled under a running gang (and under a
# --no-kill batch job, which goes on without it)
# takes the node DOWN after NodeTimeout and requeues the gang (--requeue),
# and when it is plugged back in, the ranks it still ran are killed: never
# two live copies of a rank, checked in every host's process table; the
# controller's cable pulled, each agent notices within its keepalive (10 s
# and 5 s for the answer) and comes back when it is plugged in; a gang with
# a spare repaired in place when it loses a node, one whose whole leaf is
# lost moved to its spares in the other leaf, and torchrun's elastic
# training resuming from its checkpoint through such a repair.
source "$(dirname "$0")/lib.sh"

use_netns_cluster
EXTRA_CONF="RequeueBackoff=1" netns up "$NET" 5 || { fail "the cluster did not come up"; exit 1; }
on() { local host=$1; shift; netns run "$NET" "$host" "$@"; }
# Every command of the test runs on the login host, as a user's would.
cohort() { on login "$BIN/cli/cohort" "$@"; }
# json EXPR: EXPR of the JSON on stdin (as `j`), printed.
json() { python3 -c "import json, sys; j = json.load(sys.stdin); print($1)" 2>/dev/null; }
node_state() { cohort nodes -N --json | json "next(n['state'] for n in j['nodes'] if n['name'] == '$1')"; }
node_is() { [ "$(node_state "$1")" = "$2" ]; }
job_nodes() { cohort hostlist expand "$(cohort show job "$1" --json | json "j['nodes']")"; }

# 1. A step across four hosts: output streamed to the login host, each rank
# on its own host, MASTER_ADDR the first node's own address.
out=$(cohort run -N 4 -- sh -c 'echo "$SLURM_PROCID $(hostname) $MASTER_ADDR $(hostname -I)"' \
  2>"$WORK/run.err" | sort)
[ "$(wc -l <<<"$out")" = 4 ] || fail "cohort run -N 4 printed: $out $(cat "$WORK/run.err")"
[ "$(awk '{print $2}' <<<"$out" | sort -u | wc -l)" = 4 ] || fail "ranks share hosts: $out"
read -r rank host master own <<<"$(head -1 <<<"$out")"
[ "$rank" = 0 ] && [ "$master" = "$own" ] && [[ "$own" == 198.18.0.* ]] ||
  fail "MASTER_ADDR $master is not rank 0's own address ($host, $own): $out"
awk -v m="$master" '$3 != m {exit 1}' <<<"$out" || fail "the ranks disagree on MASTER_ADDR: $out"
pass "a 4-node step from the login host: one rank per host, MASTER_ADDR $master ($host's own)"

# Real PyTorch DDP (gloo) across the four hosts, its output streamed back.
python=python3
python3 -c 'import torch' 2>/dev/null || python=/usr/bin/python3
if "$python" -c 'import torch' 2>/dev/null; then
  out=$(cohort run -N 4 -- "$python" "$ROOT/tests/data/pytorch/ddp.py" 2>&1)
  for rank in 0 1 2 3; do
    [ "$(grep -c "^rank $rank/4 local 0 ok allreduce=10$" <<<"$out")" = 1 ] ||
      fail "DDP rank $rank did not report ok: $out"
  done
  pass "PyTorch DDP over gloo: 4 ranks on 4 hosts all-reduced and trained in lockstep"
else
  fail "python3 cannot import torch: run scripts/install-deps.sh (it installs python3-torch)"
fi

# 2. A node's cable pulled under a running 4-node gang.
# rank_copies HOST ID: the ranks of job ID running on HOST, from its
# process table.
rank_copies() {
  local pid count=0
  for pid in $(netns pids "$NET" "$1"); do
    [ "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" = "sleep 300 " ] || continue
    tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "SLURM_JOB_ID=$2" &&
      count=$((count + 1))
  done
  echo "$count"
}
one_copy_each() {
  local host total=0 copies
  for host in node01 node02 node03 node04 node05; do
    copies=$(rank_copies "$host" "$id")
    if job_nodes "$id" | grep -qx "$host"; then [ "$copies" = 1 ] || return 1
    else [ "$copies" = 0 ] || return 1; fi
    total=$((total + copies))
  done
  [ "$total" = 4 ]
}
# copies: every host's count of the job's ranks, for a failure's message.
copies() { for h in node01 node02 node03 node04 node05; do echo -n "$h $(rank_copies "$h" "$id"); "; done; }
id=$(submit -N 4 --requeue -o "$NET/gang-%j.out" -- \
  sh -c 'echo "restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"; exec sleep 300')
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start: $(cohort show job "$id")"
# From here to the end, five times a second: the job's live ranks over
# every host's process table, which must never pass 4.
( while :; do
    total=0
    for h in node01 node02 node03 node04 node05; do total=$((total + $(rank_copies "$h" "$id"))); done
    echo "$total" >>"$WORK/live-ranks"
    sleep 0.2
  done ) &
PIDS+=($!)
mapfile -t first < <(job_nodes "$id")
victim=${first[1]}
netns cut "$NET" "$victim"
# Silent for three heartbeats, it is marked not responding (node03*), then
# DOWN at NodeTimeout.
not_responding() { cohort nodes -N | grep -q "^$victim .*[a-z]\* .*not responding for"; }
wait_until 10 not_responding || fail "cohort nodes -N never marked $victim not responding"
wait_until 30 node_is "$victim" DOWN ||
  fail "$victim is $(node_state "$victim") after its cable was pulled"
again() { state_is "$id" RUNNING && [ "$(grep -c '^restart 1 on' "$NET/gang-$id.out")" = 4 ]; }
wait_until 30 again || fail "job $id did not run again: $(cohort show job "$id"; cat "$NET/gang-$id.out")"
job_nodes "$id" | grep -qx "$victim" && fail "job $id runs again on $victim, which is down"
# Cut off, the victim's agent stopped its rank itself before the new
# attempt started: one live copy of each rank, by every process table.
one_copy_each || fail "two live copies of a rank of job $id while $victim was cut off: $(copies)"
grep -q "agent_fenced node=$victim" "$NET/hosts/$victim/agent.log" ||
  fail "no agent_fenced in $victim's log"
pass "$victim cut off: DOWN after NodeTimeout, fenced its rank itself, job $id requeued on 4 other hosts"

# Plugged back in: the agent registers again, with nothing of the old
# attempt left running.
netns heal "$NET" "$victim"
wait_until 30 node_is "$victim" IDLE ||
  fail "$victim is $(node_state "$victim") after its cable was plugged back in"
one_copy_each || fail "two live copies of a rank of job $id once $victim was back: $(copies)"
pass "$victim back: IDLE; still one live copy of each rank, by every process table"

# 3. The controller's cable pulled: each agent notices within its keepalive.
nodes=(node01 node02 node03 node04 node05)
declare -A before
for host in "${nodes[@]}"; do
  before[$host]=$(grep -c agent_disconnected "$NET/hosts/$host/agent.log")
done
lost_everywhere() {
  local host
  for host in "${nodes[@]}"; do
    [ "$(grep -c agent_disconnected "$NET/hosts/$host/agent.log")" -gt "${before[$host]}" ] || return 1
  done
}
start=$(date +%s)
netns cut "$NET" ctl
wait_until 40 lost_everywhere || fail "agents did not notice the controller was gone"
took=$(($(date +%s) - start))
netns heal "$NET" ctl
all_idle_or_running() {
  [ "$(cohort nodes -N --json | json "sorted({n['state'] for n in j['nodes']})")" = \
    "['ALLOCATED', 'IDLE']" ]
}
wait_until 40 all_idle_or_running || fail "the nodes did not come back: $(cohort nodes -N)"
wait_until 30 state_is "$id" RUNNING || fail "job $id is $(job_state "$id") after the controller returned"
one_copy_each || fail "two live copies of a rank of job $id after the controller returned: $(copies)"
cohort cancel "$id"
pass "controller cut off: every agent noticed within ${took} s, all came back, one copy of each rank"
most=$(sort -n "$WORK/live-ranks" | tail -1)
[ "$most" -le 4 ] || fail "at some moment $most ranks of the 4-rank job $id were alive"
pass "never more than 4 live ranks of job $id in $(wc -l <"$WORK/live-ranks") samples of every host"

wait_until 30 finished "$id" || fail "job $id did not end when cancelled"

# --no-kill: a 3-node batch job goes on without a node whose cable is
# pulled (not its first); its next step runs on the two nodes left.
cat >"$NET/nokill.sh" <<SCRIPT
#!/bin/bash
$BIN/cli/cohort run -N 3 -- hostname | sort | tr '\n' ' '; echo
while [ ! -e "$NET/go-\$SLURM_JOB_ID" ]; do sleep 0.2; done
$BIN/cli/cohort run -- hostname | sort | tr '\n' ' '; echo
SCRIPT
nk=$(submit -N 3 --no-kill -o "$NET/nokill-%j.out" "$NET/nokill.sh")
first_step() { [ -s "$NET/nokill-$nk.out" ]; }
wait_until 30 first_step || fail "job $nk's first step did not run: $(cohort show job "$nk")"
mapfile -t held < <(job_nodes "$nk")
cut=${held[2]}
netns cut "$NET" "$cut"
dropped() { [ "$(job_nodes "$nk" | wc -l)" = 2 ] && state_is "$nk" RUNNING; }
wait_until 30 dropped || fail "job $nk did not go on without $cut: $(cohort show job "$nk")"
touch "$NET/go-$nk"
wait_until 30 state_is "$nk" COMPLETED || fail "job $nk is $(job_state "$nk"): $(cat "$NET/nokill-$nk.out")"
netns heal "$NET" "$cut"
second=$(sed -n 2p "$NET/nokill-$nk.out")
[ "$(sed -n 1p "$NET/nokill-$nk.out" | wc -w)" = 3 ] && [ "$(wc -w <<<"$second")" = 2 ] &&
  ! grep -qw "$cut" <<<"$second" ||
  fail "job $nk's steps ran on: $(cat "$NET/nokill-$nk.out")"
wait_until 30 node_is "$cut" IDLE || fail "$cut did not come back: $(node_state "$cut")"
pass "--no-kill: job $nk went on without $cut, its next step on ${second% }"

# 4. Gang repair: a 3-node gang holding one spare loses a node. The spare
# takes its rank in place, the other two nodes are kept, every rank starts
# again (SLURM_RESTART_COUNT=1), one live copy of each; the lost node comes
# back drained.
id=$(submit -N 3 --spares=1 -o "$NET/repair-%j.out" -- \
  sh -c 'echo "restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"; exec sleep 300')
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start: $(cohort show job "$id")"
spare=$(cohort show job "$id" --json | json "j['spare_nodes']")
mapfile -t gang < <(job_nodes "$id")
[ "${#gang[@]}" = 3 ] && [[ "$spare" == node0? ]] || fail "job $id holds ${gang[*]}, spare '$spare'"
victim=${gang[1]}
netns cut "$NET" "$victim"
repaired() { [ "$(grep -c '^restart 1 on' "$NET/repair-$id.out")" = 3 ] && state_is "$id" RUNNING; }
wait_until 40 repaired || fail "job $id was not repaired: $(cohort show job "$id"; cat "$NET/repair-$id.out")"
expected=$(printf '%s\n' "${gang[0]}" "$spare" "${gang[2]}" | sort | tr '\n' ' ')
[ "$(job_nodes "$id" | sort | tr '\n' ' ')" = "$expected" ] ||
  fail "job $id runs on $(job_nodes "$id" | tr '\n' ' ') after the repair, not $expected"
grep -qx "restart 1 on $spare" "$NET/repair-$id.out" || fail "no rank restarted on $spare"
cohort show job "$id" | grep -q "Repairs=1" || fail "show job lists no repair: $(cohort show job "$id")"
gone() {
  local host
  for host in node01 node02 node03 node04 node05; do
    if job_nodes "$id" | grep -qx "$host"; then [ "$(rank_copies "$host" "$id")" = 1 ] || return 1
    else [ "$(rank_copies "$host" "$id")" = 0 ] || return 1; fi
  done
}
wait_until 10 gone || fail "not one live copy of each rank of job $id after the repair: $(copies)"
netns heal "$NET" "$victim"
wait_until 30 node_is "$victim" DRAINED ||
  fail "$victim is $(node_state "$victim") after it came back, not DRAINED"
cohort cancel "$id"
cohort resume "$victim" >/dev/null || fail "cohort resume $victim failed"
pass "repair: $victim replaced by spare $spare in job $id, the rest kept, every rank again as restart 1"

# A whole leaf switch lost: the gang's two ranks on leaf1 (node02-03, with
# node01, all cut at once) move in one decision to its two spares on leaf2.
id=$(submit -N 2 --spares=2 -w node02,node03 -x node01 -o "$NET/leaf-%j.out" -- \
  sh -c 'echo "restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"; exec sleep 300')
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start: $(cohort show job "$id")"
spares=$(cohort show job "$id" --json | json "j['spare_nodes']")
[ "$spares" = "node[04-05]" ] || fail "job $id holds spares '$spares', not node[04-05]"
for host in node01 node02 node03; do netns cut "$NET" "$host"; done
moved() { [ "$(grep -c '^restart 1 on node0[45]$' "$NET/leaf-$id.out")" = 2 ] && state_is "$id" RUNNING; }
wait_until 40 moved || fail "job $id did not move to leaf2: $(cohort show job "$id"; cat "$NET/leaf-$id.out")"
[ "$(cohort show job "$id" --json | json "len(j['repairs'])")" = 1 ] &&
  [ "$(cohort show job "$id" --json | json "j['repairs'][0]['lost']")" = "['node02', 'node03']" ] ||
  fail "not one repair of both ranks: $(cohort show job "$id" --json | json "j['repairs']")"
for host in node01 node02 node03; do netns heal "$NET" "$host"; done
cohort cancel "$id"
for host in node02 node03; do
  wait_until 30 node_is "$host" DRAINED && cohort resume "$host" >/dev/null || fail "$host: $(node_state "$host")"
done
wait_until 30 node_is node01 IDLE || fail "node01 is $(node_state node01) after the leaf came back"
wait_until 30 finished "$id" || fail "job $id did not end when cancelled"
pass "leaf1 lost whole: job $id's two ranks moved to its spares node[04-05] in one repair"

# 5. Elastic training through a repair: torchrun (--nnodes=1:2, c10d
# rendezvous at the first node's own address) on two hosts and a spare; a
# node's cable pulled mid-training. The repair starts torchrun again on the
# repaired pair, which resumes from the last checkpoint and trains to the end.
if "$python" -c 'import torch' 2>/dev/null; then
  ckpt=$NET/elastic.ckpt
  failed_before=$FAILURES
  # (Debian's torch 1.13 spells torchrun's options with underscores, and
  # under Python 3.11 needs --redirects and --tee given, else it fails
  # reading their default 0; its workers' lines come as "[default0]:…".
  # --monitor_interval=1: torchrun looks at its workers every second, not
  # every 5, so it ends soon after they do.)
  id=$(submit -N 2 --spares=1 -o "$NET/elastic-%j.out" -- sh -c "exec $python -m torch.distributed.run \
    --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_id=\$SLURM_JOB_ID \
    --rdzv_endpoint=\$MASTER_ADDR:\$MASTER_PORT --rdzv_conf=last_call_timeout=2,join_timeout=60 \
    --redirects=1 --tee=1 --monitor_interval=1 \
    $ROOT/tests/data/pytorch/elastic.py $ckpt 25")
  trained() { grep -q ':step 5$' "$NET/elastic-$id.out" 2>/dev/null; }
  wait_until 60 trained || fail "job $id did not train: $(cohort show job "$id"; cat "$NET/elastic-$id.out")"
  mapfile -t pair < <(job_nodes "$id")
  netns cut "$NET" "${pair[1]}"
  resumed() { grep -Eq ':rank 0/2 starts at step [1-9][0-9]* restart 1 ' "$NET/elastic-$id.out"; }
  wait_until 60 resumed || fail "job $id did not resume: $(cohort show job "$id"; cat "$NET/elastic-$id.out")"
  wait_until 60 state_is "$id" COMPLETED ||
    fail "job $id is $(job_state "$id"): $(cat "$NET/elastic-$id.out")"
  from=$(sed -n 's/.*:rank 0\/2 starts at step \([0-9]*\) restart 1 .*/\1/p' "$NET/elastic-$id.out" | head -1)
  grep -q ':rank 1/2 done at step 25$' "$NET/elastic-$id.out" ||
    fail "job $id's second worker did not finish: $(cat "$NET/elastic-$id.out")"
  netns heal "$NET" "${pair[1]}"
  wait_until 30 node_is "${pair[1]}" DRAINED && cohort resume "${pair[1]}" >/dev/null
  [ "$FAILURES" = "$failed_before" ] &&
    pass "torchrun --nnodes=1:2 through a repair: ${pair[1]} lost, resumed at step $from from its checkpoint, done at 25"
fi

finish_test
