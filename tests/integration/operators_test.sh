#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What operators of a shared cluster set, with Slurm's commands on the demo
# cluster. The account tree: a GPU quota (GrpTRES) on the middle of three
# levels holds back a leaf user's job and `cohort why` names it; sacctmgr
# makes an account with a GPU-minute budget (GrpTRESMins) that a job
# spends and that then stops the next; sacctmgr adds a user who can then
# submit, and the audit shows who did it; sshare indents the tree.
# QOS by sacctmgr: a QOS's GrpTRES holds its second job (why names it), an
# account's QOS= list refuses another QOS.
# Reservations: a maintenance window keeps a long job off while a short one
# starts (both from why), its nodes are free when it starts; a reservation
# by node count takes one leaf switch's nodes, and its job runs there; one
# by shape (NodeCnt=4 Switches=1) whose node goes DOWN before its start is
# placed again on another leaf when it starts.
# After kill -9 the tree, the QOS, the budget's use, the audit and the
# reservations are all there; sreport's figures are the jobs' use as sacct shows it.
# What a job uses: the agents sample each second (JobAcctGatherFrequency=1)
# through a stand-in for NVIDIA's NVML (built by the tests) that answers
# recorded utilization and memory; sstat shows a running step's CPU,
# memory and GPUs, /metrics and the REST API's job mark its GPUs idle once
# the recording says so, and sacct keeps the step's figures after it ends.
source "$(dirname "$0")/lib.sh"
SLURM_BIN=$BIN/cli/slurm
export PATH="$SLURM_BIN:$BIN/cli:$PATH"
STANDIN="$BIN/tests/unit/libcohort_nvml_standin.so"
[ -f "$STANDIN" ] || { fail "no NVML stand-in at $STANDIN: the build makes it"; finish_test; }
# Each of a node's 8 GPUs: no fabric, 85% busy, 30,000 MiB in use.
for _ in 1 2 3 4 5 6 7 8; do echo "- 0 85 30000"; done >"$WORK/gpus"
export COHORT_NVML_LIBRARY="$STANDIN" COHORT_NVML_STANDIN="$WORK/gpus"

IT_HTTP=on
EXTRA_CONF="JobAcctGatherFrequency=1
PriorityUsageResetPeriod=MONTHLY
AccountName=science
AccountName=vision Parent=science GrpTRES=gres/gpu=16
AccountName=cv Parent=vision" start_cluster

# 1. Three levels: vision's quota holds cv's third 8-GPU job.
jobs=()
for _ in 1 2 3; do
  jobs+=("$(sbatch --parsable -A cv -N 1 --gpus-per-node=8 -t 5 -o /dev/null --wrap 'sleep 300')") ||
    fail "sbatch -A cv was refused"
done
wait_until 20 state_is "${jobs[1]}" RUNNING || fail "the second job did not start"
wait_until 20 considered "${jobs[2]}"
state_is "${jobs[0]}" RUNNING || fail "the first job is $(job_state "${jobs[0]}")"
[ "$(job_reason "${jobs[2]}")" = AssocGrpGRES ] ||
  fail "the third job waits for $(job_reason "${jobs[2]}"), not AssocGrpGRES"
cohort why "${jobs[2]}" | grep -q "account vision, above the job's account cv, allows 16 GPUs at once (GrpTRES=gres/gpu=16)" ||
  fail "why does not name vision's quota: $(cohort why "${jobs[2]}")"
scancel "${jobs[0]}"
wait_until 20 state_is "${jobs[2]}" RUNNING || fail "the third job did not start once the quota had room"
scancel "${jobs[1]}" "${jobs[2]}"
pass "GrpTRES on the middle account holds a leaf user's job (AssocGrpGRES, why names it)"

# 2. A budget of one GPU-minute: a job spends part of it, the next waits.
sacctmgr -i add account lab Parent=science GrpTRESMins=gres/gpu=1 >/dev/null ||
  fail "sacctmgr add account lab failed"
spender=$(sbatch --parsable -A lab -N 1 --gpus-per-node=1 -t 1 -o /dev/null --wrap 'sleep 2') ||
  fail "the first job of lab was refused"
wait_until 30 finished "$spender" || fail "the job spending the budget did not end"
next=$(sbatch --parsable -A lab -N 1 --gpus-per-node=1 -t 1 -o /dev/null --wrap true) ||
  fail "the second job of lab was refused"
wait_until 20 considered "$next"
[ "$(job_reason "$next")" = AssocGrpGRESMinutes ] ||
  fail "the next job waits for $(job_reason "$next") ($(job_state "$next")), not AssocGrpGRESMinutes"
cohort why "$next" | grep -q "account lab has used 0\.[0-9] of its 1\.0 GPU-minutes" ||
  fail "why does not say how much of the budget is used: $(cohort why "$next")"
pass "a GPU-minute budget spent by one job stops the next (AssocGrpGRESMinutes)"

# 3. A user sacctmgr adds can then charge the account.
chmod 0711 "$WORK/state"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if out=$(as_nobody "$SLURM_BIN/sbatch" -A lab -D /tmp -o /dev/null --wrap true 2>&1); then
  fail "nobody charged lab before being added: $out"
else
  grep -q "is not a member of account lab" <<<"$out" || fail "the refusal: $out"
fi
sacctmgr -i add user nobody Account=lab MaxJobs=2 >/dev/null || fail "sacctmgr add user failed"
as_nobody "$SLURM_BIN/sbatch" --parsable -H -D /tmp -o /dev/null --wrap true >/dev/null ||
  fail "nobody could not submit to its default account lab once added"
[ "$(sacctmgr -n -s list user nobody format=account%256 | tr -d ' ')" = lab ] ||
  fail "Snakemake's call: $(sacctmgr -n -s list user nobody format=account%256)"
sacctmgr -n -P show transactions format=Action,Actor,Where,Info >"$WORK/audit.txt"
grep -qx "Add Account|root|lab|Parent=science GrpTRESMins=gres/gpu=1" "$WORK/audit.txt" &&
  grep -qx "Add User|root|nobody in lab|MaxJobs=2" "$WORK/audit.txt" ||
  fail "the audit: $(cat "$WORK/audit.txt")"
if out=$(sacctmgr -i modify account vision set Fairshare=4 2>&1); then
  fail "sacctmgr changed cohort.conf's account vision: $out"
else
  grep -q "defined in cohort.conf" <<<"$out" || fail "the refusal for vision: $out"
fi
if out=$(sacctmgr -i modify account lab set Parent=lab 2>&1); then
  fail "sacctmgr made a loop: $out"
else
  grep -q "account lab would be under itself" <<<"$out" || fail "the loop's refusal: $out"
fi
sshare | grep -q "^  cv " || fail "sshare does not indent cv two levels: $(sshare)"
pass "sacctmgr adds a user who can then submit; the audit names who; sshare shows the tree"

# 3b. A QOS made by sacctmgr: its GrpTRES bounds its jobs together; an
# account's QOS= list decides who may ask for it.
sacctmgr -i add qos burst Priority=10 GrpTRES=gres/gpu=8 MaxWall=10 >/dev/null ||
  fail "sacctmgr add qos burst failed"
[ "$(sacctmgr -n -P show qos burst format=Name,Priority,GrpTRES,MaxWall)" = "burst|10|gres/gpu=8|00:10:00" ] ||
  fail "sacctmgr show qos: $(sacctmgr -P show qos)"
q1=$(sbatch --parsable -A science --qos=burst -N 1 --gpus-per-node=8 -t 5 -o /dev/null --wrap 'sleep 300') &&
  q2=$(sbatch --parsable -A science --qos=burst -N 1 --gpus-per-node=8 -t 5 -o /dev/null --wrap true) ||
  fail "sbatch --qos=burst was refused"
wait_until 20 state_is "$q1" RUNNING || fail "the first burst job did not start"
wait_until 20 considered "$q2"
[ "$(job_reason "$q2")" = QOSGrpGRES ] || fail "the second burst job waits for $(job_reason "$q2"), not QOSGrpGRES"
cohort why "$q2" | grep -q "QOS burst allows 8 GPUs at once (GrpTRES=gres/gpu=8); its jobs hold 8" ||
  fail "why does not name the QOS's limit: $(cohort why "$q2")"
if out=$(sbatch -A science --qos=burst -t 20 -o /dev/null --wrap true 2>&1); then
  fail "a job over burst's MaxWall was taken: $out"
fi
sacctmgr -i modify account lab set QOS=normal >/dev/null || fail "sacctmgr modify account lab set QOS= failed"
if out=$(as_nobody "$SLURM_BIN/sbatch" --qos=burst -D /tmp -o /dev/null --wrap true 2>&1); then
  fail "nobody used burst outside lab's QOS list: $out"
else
  grep -q "user nobody in account lab may use QOS normal; \"burst\" is not one of them" <<<"$out" ||
    fail "the QOS refusal: $out"
fi
[ "$(sacctmgr -n -P show assoc where account=lab format=Account,User,QOS | tr '\n' ' ')" = "lab||normal lab|nobody|normal " ] ||
  fail "the association's QOS: $(sacctmgr -P show assoc where account=lab format=Account,User,QOS)"
if out=$(sacctmgr -i delete qos burst 2>&1); then
  fail "sacctmgr deleted a QOS with jobs: $out"
fi
sacctmgr -n -P show transactions format=Action,Where,Info | grep -qx "Add QOS|burst|Priority=10 GrpTRES=gres/gpu=8 MaxWall=10" ||
  fail "the audit has no QOS: $(sacctmgr -n -P show transactions)"
scancel "$q1"
wait_until 20 finished "$q2" || fail "the second burst job did not run once the first ended"
pass "sacctmgr's QOS: GrpTRES holds its jobs together (QOSGrpGRES, why names it); QOS= lists what an account may use"

# 4. Reservations. A maintenance window on one leaf's nodes, in 90 s: a
# 16-node job of 5 minutes would run into it, one of a minute starts.
scontrol create reservation ReservationName=maint StartTime=now+90 Duration=10 \
  Nodes=node[01-04] Users=root Flags=MAINT >/dev/null || fail "scontrol create reservation maint failed"
long=$(sbatch --parsable -N 16 -t 5 -o /dev/null --wrap true) || fail "the long job was refused"
short=$(sbatch --parsable -N 16 -t 1 -o /dev/null --wrap true) || fail "the short job was refused"
wait_until 20 finished "$short" || fail "the short job, which ends before the window, did not run"
wait_until 20 considered "$long"
cohort why "$long" | grep -q "reservation maint (MAINT) holds node\[01-04\]" ||
  fail "why does not name the maintenance: $(cohort why "$long")"
cohort why "$long" | grep -q "with --time=00:01:00 or less it starts now" ||
  fail "why gives no shorter --time: $(cohort why "$long")"
squeue -h -j "$long" -o %r | grep -q "Reserved for maintenance" || fail "squeue's reason: $(squeue -h -j "$long" -o %r)"
# Brought forward to now, the window starts with its nodes free.
scontrol update ReservationName=maint StartTime=now >/dev/null || fail "moving maint to now was refused"
scontrol show reservation maint | grep -q "State=ACTIVE" || fail "maint is not active: $(scontrol show reservation maint)"
# sinfo shows them as Slurm's does: maint (and free: no job holds them).
[ "$(sinfo -h -N -n node[01-04] -o %T | sort -u | tr -d ' ')" = maint ] &&
  [ "$(sinfo -h -N -n node[01-04] -o %C | sort -u | tr -d ' ')" = 0/32/0/32 ] &&
  [ "$(sinfo -h -t maint -N -o %N | sort -u | tr '\n' ' ')" = "node01 node02 node03 node04 " ] ||
  fail "maint's nodes are not free, or not shown maint, at its start: $(sinfo -N -n node[01-04])"
sinfo -T | grep -q "^maint  *ACTIVE" || fail "sinfo -T: $(sinfo -T)"
# By count: the allocator picks one leaf's four nodes.
scontrol create reservation ReservationName=team StartTime=now Duration=30 NodeCnt=4 Users=nobody \
  >/dev/null || fail "scontrol create reservation team failed"
team_nodes=$(scontrol show reservation team | sed -n 's/.*Nodes=\([^ ]*\).*/\1/p')
case "$team_nodes" in node\[05-08\]|node\[09-12\]|node\[13-16\]) ;;
  *) fail "team's four nodes are not one leaf's, or take maint's: $team_nodes";; esac
[ "$(sinfo -h -N -n "$team_nodes" -o %t | sort -u | tr -d ' ')" = resv ] ||
  fail "team's idle nodes are not shown resv: $(sinfo -N -n "$team_nodes")"
mine=$(sbatch --parsable --reservation=team -N 4 -t 5 -o /dev/null --wrap 'sleep 1') ||
  fail "a job of team was refused"
wait_until 20 state_is "$mine" RUNNING || wait_until 20 finished "$mine" || fail "team's job did not start"
[ "$(cohort show job "$mine" --json | sed -n 's/.*"nodes": *"\([^"]*\)".*/\1/p' | head -1)" = "$team_nodes" ] ||
  fail "team's job ran outside it: $(cohort show job "$mine" --json | grep '"nodes"')"
if out=$(as_nobody "$SLURM_BIN/sbatch" --reservation=maint -D /tmp -o /dev/null --wrap true 2>&1); then
  fail "nobody submitted into maint: $out"
fi
pass "a maintenance window keeps a long job off (why: --time that fits) while a short one runs; by count, one leaf"

# By shape, placed at its start: four nodes under one leaf switch, in 6 s.
# One of them goes DOWN before then; at the start the allocator chooses
# the last free leaf instead.
scontrol create reservation ReservationName=shape StartTime=now+6 Duration=5 NodeCnt=4 Switches=1 \
  Users=root >/dev/null || fail "scontrol create reservation shape failed"
shape_nodes() { scontrol show reservation shape | sed -n 's/.*Nodes=\([^ ]*\).*/\1/p'; }
planned=$(shape_nodes)
scontrol show reservation shape | grep -q "Placement=ALLOCATOR Switches=1" ||
  fail "shape's record: $(scontrol show reservation shape)"
case "$planned" in node\[05-08\]|node\[09-12\]|node\[13-16\]) ;;
  *) fail "shape's four nodes are not a free leaf's: $planned (team has $team_nodes)";; esac
victim=$(scontrol show hostnames "$planned" | head -1)
scontrol update NodeName="$victim" State=DOWN Reason="fan" >/dev/null || fail "setting $victim DOWN failed"
moved() { [ "$(shape_nodes)" != "$planned" ] && scontrol show reservation shape | grep -q State=ACTIVE; }
wait_until 20 moved || fail "shape was not placed again at its start: $(scontrol show reservation shape)"
case "$(shape_nodes)" in node\[05-08\]|node\[09-12\]|node\[13-16\]) ;;
  *) fail "shape's new nodes are not one leaf's: $(shape_nodes)";; esac
scontrol show hostnames "$(shape_nodes)" | grep -qx "$victim" && fail "shape kept the DOWN node $victim"
scontrol update NodeName="$victim" State=RESUME >/dev/null || fail "resuming $victim failed"
pass "a reservation by shape whose node went DOWN is placed again on one leaf at its start ($planned, then $(shape_nodes))"

# 5. kill -9: the tree, the budget's use, the audit and the reservations stay.
used_kept() {
  python3 - "$WORK/state/state.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
row = db.execute("SELECT gpu_seconds FROM usage WHERE account = 'lab' AND user = ''").fetchone()
sys.exit(0 if row and row[0] > 0 else 1)
PY
}
wait_until 30 used_kept || fail "the budget's use was not written"
crash_controller
restart_controller
wait_until 30 all_nodes_up || fail "the nodes did not come back"
probe=$(sbatch --parsable -N 1 -t 1 -o /dev/null --wrap true)
wait_until 20 considered "$probe"
state_is "$next" PENDING || fail "after kill -9 the budget was forgotten: job $next is $(job_state "$next")"
[ "$(sacctmgr -n -P show account lab withassoc format=Account,ParentName,GrpTRESMins | head -1)" = "lab|science|gres/gpu=1" ] ||
  fail "after kill -9: $(sacctmgr -n -P show account lab withassoc format=Account,ParentName,GrpTRESMins)"
sacctmgr -n -P show transactions format=Action,Where | grep -qx "Add User|nobody in lab" ||
  fail "the audit after kill -9: $(sacctmgr -n -P show transactions)"
scontrol show reservation team | grep -qF "Nodes=$team_nodes" ||
  fail "after kill -9 team is gone: $(scontrol show reservation)"
[ "$(sacctmgr -n -P show qos burst format=Name,GrpTRES)" = "burst|gres/gpu=8" ] ||
  fail "after kill -9 the QOS burst: $(sacctmgr -n -P show qos)"
scontrol show reservation shape | grep -qF "Nodes=$(shape_nodes)" && [ -n "$(shape_nodes)" ] ||
  fail "after kill -9 shape is gone: $(scontrol show reservation)"
for r in maint team shape; do
  scontrol delete ReservationName=$r >/dev/null || fail "deleting reservation $r failed"
done
wait_until 20 finished "$long" || fail "the long job did not run once maint was deleted"
sacctmgr -i modify account lab set GrpTRESMins=gres/gpu=60 >/dev/null || fail "raising the budget failed"
wait_until 20 finished "$next" || fail "job $next did not run once the budget was raised"
pass "after kill -9 the tree, the budget's use, the audit and the reservations remain; changes apply at once"

# 6. sreport's figures are the sum of the jobs' use as sacct shows it
# (every job of this test has ended, inside the window).
sum_cpu=$(sacct -a -X -n -P -S now-1hours --format=AllocCPUS,ElapsedRaw |
  awk -F'|' '{ s += $1 * $2 } END { print s + 0 }')
sum_gpu=$(sacct -a -X -n -P -S now-1hours --format=AllocTRES,ElapsedRaw |
  awk -F'|' '{ n = 0; if (match($1, /gres\/gpu=[0-9]+/)) n = substr($1, RSTART + 9, RLENGTH - 9); s += n * $2 }
             END { print s + 0 }')
got=$(sreport -n -P -t seconds -T cpu,gres/gpu cluster utilization Start=now-1hours End=now+1hours |
  cut -d'|' -f3 | paste -sd' ')
[ "$got" = "$sum_cpu $sum_gpu" ] ||
  fail "sreport's Allocated ($got) is not the jobs' use from sacct ($sum_cpu $sum_gpu)"
[ "${sum_gpu:-0}" -gt 0 ] || fail "no GPU use was counted"
root=$(sreport -n -P -t seconds cluster accountutilizationbyuser Start=now-1hours End=now+1hours | head -1 | cut -d'|' -f6)
[ "$root" = "$sum_cpu" ] || fail "accountutilizationbyuser's root line ($root) is not $sum_cpu"
sreport -n -P -t seconds cluster accountutilizationbyuser Start=now-1hours End=now+1hours |
  grep -q "^cluster|  lab|root|root|cpu|[1-9]" ||
  fail "root's line under lab: $(sreport -n -P -t seconds cluster accountutilizationbyuser Start=now-1hours End=now+1hours)"
pass "sreport cluster utilization and accountutilizationbyuser equal the jobs' use ($sum_cpu CPU-s, $sum_gpu GPU-s)"

# 7. What a job uses while it runs (sstat, /metrics, the REST API) and
# after (sacct). Each rank holds 96 MiB and burns 2 s of CPU, then waits.
rank="import os, time
b = b'x' * (96 << 20)
t = time.time()
while time.time() - t < 2: pass
while not os.path.exists('$WORK/stop'): time.sleep(0.2)"
job=$(sbatch --parsable -N 2 --gpus-per-node=2 -t 5 -o "$WORK/use.out" \
  --wrap "srun -N 2 --ntasks-per-node=1 python3 -c \"$rank\"") || fail "sbatch of the usage job failed"
sampled() {
  local line
  line=$(sstat -n -P -j "$job.0" --format=NTasks,MaxRSS,AveCPU 2>/dev/null) || return 1
  [[ "$line" =~ ^2[|]([0-9.]+)M[|]00:0[2-9] ]] && awk -v m="${BASH_REMATCH[1]}" 'BEGIN { exit !(m >= 96) }'
}
wait_until 30 sampled || fail "sstat never showed 2 tasks of 96M and 2 s each: $(sstat -j "$job.0" 2>&1)"
line=$(sstat -n -P -j "$job" --format=JobID,NTasks,TRESUsageInAve,MaxRSSNode)
grep -q "^$job\.batch|1|" <<<"$line" || fail "sstat -j $job shows no batch step: $line"
grep -q "^$job\.0|2|cpu=00:0[2-9]\.[0-9]*,mem=[0-9.]*M,gres/gpumem=29\.30G,gres/gpuutil=85|node" <<<"$line" ||
  fail "sstat's step 0 is not 2 tasks on 85% busy GPUs: $line"
out=$(sstat -j "$job.7" 2>&1) && fail "sstat of a step that is not running succeeded: $out"
pass "sstat shows a running step's tasks, CPU time, memory and GPUs ($(cut -d'|' -f3 <<<"${line#*$'\n'}"))"

# The GPUs go idle: /metrics and the job as the REST API shows it say so.
for _ in 1 2 3 4 5 6 7 8; do echo "- 0 0 30000"; done >"$WORK/gpus"
idle() { web "$(web_base)/api/v1/jobs/$job" | grep -q '"gpu_idle_since_ms": *"[1-9]'; }
wait_until 20 idle || fail "the job's GPUs never showed idle: $(web "$(web_base)/api/v1/jobs/$job")"
metrics=$(web -f "$(web_base)/metrics")
grep -q "^cohort_job_gpu_utilization_ratio{job=\"$job\",user=\"root\",account=\"[a-z]*\",partition=\"gpu\"} 0$" <<<"$metrics" ||
  fail "/metrics has no idle utilization for job $job: $(grep cohort_job_ <<<"$metrics")"
grep -q "^cohort_job_gpus{job=\"$job\",.*} 4$" <<<"$metrics" || fail "/metrics does not count job $job's 4 GPUs"
grep -q "^cohort_job_gpus_idle_seconds{job=\"$job\"" <<<"$metrics" || fail "/metrics has no idle time"
pass "a job whose GPUs went idle is marked so in the REST API and /metrics"

touch "$WORK/stop"
wait_until 30 finished "$job" || fail "the usage job did not end"
line=$(sacct -n -P -j "$job" --format=JobID,AveRSS,MaxRSS,AveCPU,TRESUsageInMax | grep "^$job\.0|")
[[ "$line" =~ ^$job\.0[|]([0-9]+)K[|]([0-9]+)K[|]00:0[2-9]\.[0-9]+[|]cpu=00:0[2-9]\.[0-9]+,mem=[0-9.]+M,gres/gpumem=29\.30G,gres/gpuutil=85$ ]] &&
  [ "${BASH_REMATCH[1]}" -ge 98304 ] || fail "sacct's step 0 after the job: $line"
pass "sacct keeps the step's usage: AveRSS, MaxRSS, AveCPU and TRESUsageInMax with the GPUs ($line)"

finish_test
