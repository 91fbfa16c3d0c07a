#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The standard set, Cohort and Slurm 22.05 side by side on the same 64-node,
# 8-leaf cluster shape in one invocation (one cluster at a time, so that the
# two never compete for the cores): dispatch latency, end-to-end throughput,
# submission rate, a large queue, placement quality, and an MPI program's
# start-up under `srun --mpi=pmix` (Open MPI). Prints one table
# and writes $BENCH_OUT/side-by-side.json. How to read it: docs/performance.md.
#
#   bench/side_by_side.sh [BUILD_DIR (default build/default)]
#
# Environment:
#   SBS_SYSTEMS          systems to measure (default "cohort slurm")
#   SBS_SLURM_PROFILES   Slurm profiles (default "nodelay guide"; see bench/peers/slurm/)
#   SBS_DISPATCH_JOBS    jobs per size for dispatch latency (default 30)
#   SBS_JOBS             jobs per throughput run (default 1000)
#   SBS_QUEUE_JOBS       pending jobs of the large queue (default 5000)
#   SBS_STEP_JOBS        batch jobs for the step start (default: SBS_DISPATCH_JOBS)
#   SBS_MPI_RUNS         runs of the MPI program per rank count (default 5)
#   SBS_PARTS            parts to measure (default "dispatch step throughput
#                        placement queue mpi"); a subset measures only those
#   SBS_GUIDE_FULL=1     the whole set in Slurm's guide profile too. By default
#                        that profile measures dispatch and the submission
#                        rates at full size but end-to-end throughput only for
#                        an array of SBS_GUIDE_JOBS (default 100) jobs, and not
#                        placement (the same plugins place as in nodelay): its
#                        20-second batch delay makes 1,000 jobs take about
#                        3 minutes per mode there (bench/peers/slurm/README.md)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/default}" && pwd)
out=${BENCH_OUT:-$build/bench-results}
systems=${SBS_SYSTEMS:-cohort slurm}
profiles=${SBS_SLURM_PROFILES:-nodelay guide}
dispatch_jobs=${SBS_DISPATCH_JOBS:-30}
jobs=${SBS_JOBS:-1000}
queue_jobs=${SBS_QUEUE_JOBS:-5000}
step_jobs=${SBS_STEP_JOBS:-$dispatch_jobs}
mpi_runs=${SBS_MPI_RUNS:-5}
parts=${SBS_PARTS:-dispatch step throughput placement queue mpi}
wanted() { [[ " $parts " == *" $1 "* ]]; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The Cohort cluster: lib.sh's start_cluster, stop_daemons and helpers, and its
# cleanup on exit (extended below to stop the Slurm peer too).
set -- "$build" "$root"
source "$root/tests/integration/lib.sh"
source "$root/bench/peers/slurm/cluster.sh"
trap 'slurm_stop; cohort_stop; cleanup' EXIT
results=$WORK/results.tsv  # SYSTEM PROFILE METRIC VALUE NOTE
: >"$results"
SYS=
PROFILE=

# now_ns VAR: the wall clock in nanoseconds (bash's clock, microseconds; no
# process is started, so no command's time includes starting `date`).
now_ns() { printf -v "$1" '%s000' "${EPOCHREALTIME/./}"; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$SYS" "$PROFILE" "$1" "$2" "${3:-}" >>"$results"; }
say() { echo "== $SYS${PROFILE:+ ($PROFILE)}: $* [$((SECONDS - started)) s]" >&2; }
started=$SECONDS

# percentiles FILE: p50 p95 max of the numbers in FILE (nearest rank).
percentiles() {
  sort -n "$1" | awk '{a[NR] = $1} END {
    p50 = int((NR * 50 + 99) / 100); p95 = int((NR * 95 + 99) / 100)
    printf "%s %s %s\n", a[p50], a[p95], a[NR] }'
}
median() { sort -n "$1" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ms() { awk -v ns="$1" 'BEGIN {printf "%.1f", ns / 1e6}'; }
rate() { awk -v n="$1" -v ns="$2" 'BEGIN {printf "%.1f", n / (ns / 1e9)}'; }

# ---------------------------------------------------------------------------
# The two systems behind one set of verbs. Every job asks whole nodes
# (--exclusive) on both sides.

cohort_cluster_conf() {
  local l
  cat >"$WORK/cluster.conf" <<CONF
# 64 emulated nodes of 8 GPUs, the shape of bench/peers/slurm/cluster.sh.
ClusterName=bench
NodeTimeout=10
KillWait=5
NodeName=n[001-064] CPUs=32 MemoryMB=256000 Gpus=8 Features=emulated
PartitionName=gpu Nodes=ALL Default=YES MaxTime=UNLIMITED DefaultTime=60
CONF
  : >"$WORK/topology.conf"
  for l in $(seq 1 8); do
    printf 'SwitchName=leaf%d Nodes=n[%03d-%03d]\n' "$l" $(((l - 1) * 8 + 1)) $((l * 8)) \
      >>"$WORK/topology.conf"
  done
  echo "SwitchName=spine Switches=leaf[1-8]" >>"$WORK/topology.conf"
}

# submit_true: one one-node `true` job.
cohort_submit_true() { cohort submit -N 1 --exclusive -o /dev/null -- true >/dev/null; }
slurm_submit_true() { sbatch -N 1 --exclusive -o /dev/null --wrap true >/dev/null; }

# arrays_supported N: whether the CLI takes an array of N tasks; when not,
# prints the reason and exits 3. Asked before the timed submission.
cohort_arrays_supported() {
  local probe
  probe=$(cohort submit --test-only --array=0-$(($1 - 1)) -N 1 --exclusive -o /dev/null -- true 2>&1)
  if grep -Eqi 'array.*(not supported|unknown|not expected)|(unknown|unrecognized).*array' <<<"$probe"; then
    grep -i array <<<"$probe" | head -1
    return 3
  fi
}
slurm_arrays_supported() { :; }
# submit_array N: one array of N one-node `true` jobs.
cohort_submit_array() {
  cohort submit --array=0-$(($1 - 1)) -N 1 --exclusive -o /dev/null -- true >/dev/null
}
slurm_submit_array() { sbatch --array=0-$(($1 - 1)) -N 1 --exclusive -o /dev/null --wrap true >/dev/null; }

# submit_long NODES [ARGS]: a job that runs until cancelled; prints its id.
cohort_submit_long() {
  local n=$1; shift
  cohort submit --parsable -N "$n" --exclusive -o /dev/null "$@" -- sleep 100000
}
slurm_submit_long() {
  local n=$1; shift
  sbatch --parsable -N "$n" --exclusive -o /dev/null "$@" --wrap "sleep 100000"
}

# dispatch NODES FILE: a NODES-node job of one rank per node, each rank
# appending `date +%s%N` to FILE, started by the blocking launcher (cohort
# run, srun: an allocation and ranks fanned out to the nodes, as a user
# starts an interactive gang); returns once the job has ended. Neither
# reads stdin: a piped one would be passed on to rank 0.
cohort_dispatch() {
  cohort run -N "$1" --exclusive -- sh -c "date +%s%N >>$2" </dev/null >/dev/null \
    2>>"$WORK/run.log"
}
slurm_dispatch() {
  srun -N "$1" --ntasks-per-node=1 --exclusive -o /dev/null sh -c "date +%s%N >>$2" </dev/null
}

# submit_step_job: a batch job of 8 whole nodes whose script appends the
# time it starts to $STEP_FILE, then starts a step of one rank per node
# (cohort run inside it, srun inside sbatch), each rank appending its own.
cohort_submit_step_job() {
  cat >"$WORK/step-job.sh" <<SCRIPT
#!/bin/sh
date +%s%N >>"\$STEP_FILE"
exec "$BIN/cli/cohort" run -N 8 --ntasks-per-node=1 -- sh -c 'date +%s%N >>"\$STEP_FILE"'
SCRIPT
  cohort submit -N 8 --exclusive -o /dev/null "$WORK/step-job.sh" >/dev/null
}
slurm_submit_step_job() {
  cat >"$WORK/step-job.sh" <<'SCRIPT'
#!/bin/sh
date +%s%N >>"$STEP_FILE"
exec srun -N 8 --ntasks-per-node=1 sh -c 'date +%s%N >>"$STEP_FILE"'
SCRIPT
  sbatch -N 8 --exclusive -o /dev/null "$WORK/step-job.sh" >/dev/null
}

# srun_path: the srun of the MPI start-up, given the same arguments on both
# sides: Cohort's srun front-end, and Slurm's own.
cohort_srun_path() { echo "$BIN/cli/slurm/srun"; }
slurm_srun_path() { command -v srun; }
# mpi_step ID NODES PROGRAM: `srun --mpi=pmix` of PROGRAM as a step of job
# ID over NODES of its nodes, one rank each, to its end (120 s at most).
mpi_step() {
  timeout 120 "$("${SYS}_srun_path")" --jobid="$1" -N "$2" --ntasks-per-node=1 --mpi=pmix "$3"
}

# queue_empty: no job left in the queue (pending, running or ending).
cohort_queue_empty() { local j; j=$(cohort queue --json) && ! grep -q '"id"' <<<"$j"; }
slurm_queue_empty() { local j; j=$(squeue -h -o %i) && [ -z "$j" ]; }

# queue_list: the full queue listing, as a user would print it.
cohort_queue_list() { cohort queue >/dev/null; }
slurm_queue_list() { squeue >/dev/null; }

# job_nodes ID: the job's nodes as a hostlist, once it runs.
cohort_job_nodes() {
  cohort show job "$1" --json | sed -n 's/^ *"nodes": *"\(.*\)",$/\1/p'
}
slurm_job_nodes() { squeue -h -j "$1" -t R -o %N; }
expand_nodes() { cohort hostlist expand "$1"; }
job_running() { [ -n "$("${SYS}_job_nodes" "$1" 2>/dev/null)" ]; }

# cohort_stop: ranks outlive their agent by design (each runs under its own
# cohort-stepd), so the jobs are cancelled before the daemons stop.
COHORT_UP=
cohort_stop() {
  [ -n "$COHORT_UP" ] || return 0
  cohort_cancel_all || echo "side by side: Cohort jobs still running after cancel" >&2
  stop_daemons
  COHORT_UP=
}
cohort_cancel_all() {
  local ids
  ids=$(cohort queue --json | sed -n 's/^ *"id": *\([0-9]*\),$/\1/p')
  [ -n "$ids" ] && cohort cancel $ids >/dev/null
  wait_until 120 cohort_queue_empty
}
slurm_cancel_all() { slurm_drain_queue 120; }

# ---------------------------------------------------------------------------
# The measurements, the same for both systems.

measure_dispatch() {
  local per=$1 n i f s last
  for n in 1 8 32; do
    say "dispatch latency, $n-node jobs, $per jobs"
    : >"$WORK/dispatch-$n"
    for i in $(seq "$per"); do
      f=$WORK/ranks-$SYS-$PROFILE-$n-$i
      now_ns s
      "${SYS}_dispatch" "$n" "$f"
      if [ "$(wc -l <"$f" 2>/dev/null || echo 0)" -ne "$n" ]; then
        echo "dispatch: $SYS $n-node job $i: $(wc -l <"$f" 2>/dev/null || echo 0) of $n ranks ran" >&2
        return 1
      fi
      last=$(sort -n "$f" | tail -1)
      echo $((last - s)) >>"$WORK/dispatch-$n"
    done
    read -r p50 p95 max < <(percentiles "$WORK/dispatch-$n")
    record "dispatch_${n}n_p50_ms" "$(ms "$p50")" "n=$per"
    record "dispatch_${n}n_p95_ms" "$(ms "$p95")" "n=$per"
    record "dispatch_${n}n_max_ms" "$(ms "$max")" "n=$per"
  done
}

# The batch step's start to an 8-node step's last rank running, per job: what
# a training script's `srun torchrun ...` waits before its ranks run.
measure_step() {
  local per=$1 i f deadline
  say "batch script start to an 8-node step running, $per jobs"
  : >"$WORK/step-8"
  for i in $(seq "$per"); do
    f=$WORK/step-$SYS-$PROFILE-$i
    : >"$f"
    STEP_FILE=$f "${SYS}_submit_step_job" || return 1
    deadline=$((SECONDS + 60))
    until [ "$(wc -l <"$f")" -ge 9 ]; do
      [ "$SECONDS" -ge "$deadline" ] && {
        echo "step: $SYS job $i: $(wc -l <"$f") of 9 lines" >&2
        return 1
      }
      sleep 0.05
    done
    echo $(($(tail -n +2 "$f" | sort -n | tail -1) - $(head -1 "$f"))) >>"$WORK/step-8"
    until "${SYS}_queue_empty"; do sleep 0.05; done
  done
  read -r p50 p95 max < <(percentiles "$WORK/step-8")
  record step_8n_p50_ms "$(ms "$p50")" "n=$per"
  record step_8n_p95_ms "$(ms "$p95")" "n=$per"
}

# throughput MODE JOBS [submit]: JOBS one-node `true` jobs submitted one CLI call at a
# time from one client (seq), from 4 concurrent clients (4c), or as one
# array (array); submission rate to the last submission's answer, jobs/s to
# the last job's end (the queue empty, polled every 0.2 s). With `submit`,
# only the submission rate: the jobs are cancelled once submitted.
measure_throughput() {
  local mode=$1 jobs=$2 what=${3:-both} s e_sub e_all pids=() c reason
  say "throughput, $jobs one-node jobs, $mode"
  if [ "$mode" = array ]; then
    reason=$("${SYS}_arrays_supported" "$jobs")
    case $? in
      0) ;;
      3)
        record submit_rate_array_per_s n/a "$reason"
        record throughput_array_jobs_per_s n/a "$reason"
        echo "   n/a: $reason" >&2
        return 0
        ;;
      *) return 1 ;;
    esac
  fi
  now_ns s
  case $mode in
    seq) for _ in $(seq "$jobs"); do "${SYS}_submit_true" || return 1; done ;;
    4c)
      for c in 1 2 3 4; do
        (for _ in $(seq $((jobs / 4))); do "${SYS}_submit_true" || exit 1; done) &
        pids+=($!)
      done
      for c in "${pids[@]}"; do wait "$c" || return 1; done
      ;;
    array) "${SYS}_submit_array" "$jobs" || return 1 ;;
  esac
  now_ns e_sub
  if [ "$what" = submit ]; then
    record "submit_rate_${mode}_per_s" "$(rate "$jobs" $((e_sub - s)))" "n=$jobs"
    "${SYS}_cancel_all"
    return
  fi
  local deadline=$((SECONDS + 900))
  until "${SYS}_queue_empty"; do
    [ "$SECONDS" -ge "$deadline" ] && { echo "throughput: $SYS queue not empty after 900 s" >&2; return 1; }
    sleep 0.2
  done
  now_ns e_all
  record "submit_rate_${mode}_per_s" "$(rate "$jobs" $((e_sub - s)))" "n=$jobs"
  record "throughput_${mode}_jobs_per_s" "$(rate "$jobs" $((e_all - s)))" "n=$jobs"
}

# fill_queue: a 64-node job holding the whole cluster, then $queue_jobs
# one-node jobs pending behind it, submitted by 4 concurrent clients.
fill_queue() {
  local id
  say "large queue: filling with $queue_jobs pending jobs"
  id=$("${SYS}_submit_long" 64) || return 1
  wait_until 120 job_running "$id" || return 1
  "${SYS}_fill" "$queue_jobs"
}

# fill N: N one-node jobs, as fast as the system takes them (not a figure):
# Cohort's gRPC load client (bench/submit_load.cpp) with 4 connections,
# sbatch from 4 concurrent shell loops.
cohort_fill() {
  "$BIN/bench/submit_load" "$COHORT_CONTROLLER" 4 $(($1 / 4)) >/dev/null
}
slurm_fill() {
  local pids=() c
  for c in 1 2 3 4; do
    (for _ in $(seq $(($1 / 4))); do slurm_submit_true || exit 1; done) &
    pids+=($!)
  done
  for c in "${pids[@]}"; do wait "$c" || return 1; done
}

# measure_queue: the median of 20 of one more submission and of a full listing.
measure_queue() {
  local s e i
  say "large queue: 20 submissions and 20 listings with $queue_jobs pending"
  : >"$WORK/q-submit"; : >"$WORK/q-list"
  for i in $(seq 20); do
    now_ns s; "${SYS}_submit_true" || return 1; now_ns e; echo $((e - s)) >>"$WORK/q-submit"
    now_ns s; "${SYS}_queue_list" || return 1; now_ns e; echo $((e - s)) >>"$WORK/q-list"
  done
  record queue_submit_ms "$(ms "$(median "$WORK/q-submit")")" "median of 20, $queue_jobs pending"
  record queue_list_ms "$(ms "$(median "$WORK/q-list")")" "median of 20, $queue_jobs pending"
  # Slurm's listing commands, as users type them: Cohort's front-ends
  # (the cohort binary as squeue, sinfo, sacct) against Slurm's own.
  local command
  for command in squeue sinfo sacct; do
    : >"$WORK/q-$command"
    for i in $(seq 20); do
      now_ns s
      "${SYS}_slurm_command" "$command" >/dev/null 2>&1 || { record "${command}_list_ms" n/a "$command failed"; continue 2; }
      now_ns e
      echo $((e - s)) >>"$WORK/q-$command"
    done
    record "${command}_list_ms" "$(ms "$(median "$WORK/q-$command")")" "median of 20, $queue_jobs pending"
  done
}
# SYS_slurm_command NAME: squeue, sinfo or sacct -a of every job, by Slurm's
# name: Cohort's front-end in the build, or Slurm's on PATH.
cohort_slurm_command() {
  if [ "$1" = sacct ]; then "$BIN/cli/slurm/sacct" -a; else "$BIN/cli/slurm/$1"; fi
}
slurm_slurm_command() { if [ "$1" = sacct ]; then sacct -a; else "$1"; fi; }

# The placement scenario: in leaves 1-8 the first 1,2,3,4,0,5,6,7 nodes are
# held by one-node long jobs (28 of 64, pinned with -w), then an 8-, a 16-
# and an 8-node job arrive one after the other. Per job: leaf switches
# spanned against the fewest that could hold it given the free nodes then.
placement_busy=(1 2 3 4 0 5 6 7)
placement_jobs=(8 16 8)
leaf_of() { echo $(((10#${1#n} - 1) / 8 + 1)); }
measure_placement() {
  local leaf k node id n free=() pinned=() spanned minimum extra=0 optimal=0 detail=
  say "placement: fragmented cluster, then ${placement_jobs[*]}-node jobs"
  for leaf in $(seq 1 8); do
    free[leaf]=$((8 - placement_busy[leaf - 1]))
    for k in $(seq "${placement_busy[leaf - 1]}"); do
      node=$(printf n%03d $(((leaf - 1) * 8 + k)))
      id=$("${SYS}_submit_long" 1 -w "$node") || return 1
      pinned+=("$id")
    done
  done
  for id in "${pinned[@]}"; do wait_until 120 job_running "$id" || return 1; done
  for n in "${placement_jobs[@]}"; do
    # The fewest leaves that hold n nodes: the fullest free leaves first.
    minimum=$(printf '%s\n' "${free[@]}" | sort -rn |
      awk -v n="$n" '{ s += $1; k++; if (s >= n) { print k; exit } }')
    id=$("${SYS}_submit_long" "$n") || return 1
    wait_until 120 job_running "$id" || { echo "placement: $n-node job did not start" >&2; return 1; }
    spanned=0
    declare -A seen=()
    for node in $(expand_nodes "$("${SYS}_job_nodes" "$id")"); do
      leaf=$(leaf_of "$node")
      free[leaf]=$((free[leaf] - 1))
      [ -z "${seen[$leaf]:-}" ] && { seen[$leaf]=1; spanned=$((spanned + 1)); }
    done
    unset seen
    extra=$((extra + spanned - minimum))
    [ "$spanned" -eq "$minimum" ] && optimal=$((optimal + 1))
    detail+="${n}n:${spanned}/${minimum} "
  done
  record placement_extra_leaves "$extra" "spanned/minimum per job: ${detail% }"
  record placement_jobs_at_minimum "$optimal" "of ${#placement_jobs[@]}: ${detail% }"
  "${SYS}_cancel_all"
}

# MPI start-up: inside a held 32-node allocation, `srun --mpi=pmix` of
# tests/data/mpi/allreduce.c (Open MPI: init, all-reduce, barrier, finalize)
# over 1, 8 and 32 nodes of one rank each, from srun's start to its exit:
# the step's launch, the stepds' PMIx servers, the fences of MPI_Init and
# MPI_Finalize, and the step's end. The emulated nodes share one machine,
# so the ranks talk over TCP on the loopback (tests/integration/mpi_test.sh).
# Then the launcher's own share: `srun --mpi=pmix true` over 32 nodes (the
# PMIx servers started and stopped, no MPI library).
measure_mpi() {
  local per=$1 id n i s e out hung
  command -v mpicc.openmpi >/dev/null || { record mpi n/a "no mpicc.openmpi"; return 0; }
  [ -x "$WORK/mpi_allreduce" ] ||
    mpicc.openmpi -O1 -o "$WORK/mpi_allreduce" "$root/tests/data/mpi/allreduce.c" || return 1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  say "MPI start-up: srun --mpi=pmix of an all-reduce, 1, 8 and 32 ranks, $per runs each"
  id=$("${SYS}_submit_long" 32) || return 1
  wait_until 120 job_running "$id" || return 1
  for n in 1 8 32; do
    : >"$WORK/mpi-$n"
    hung=0
    for i in $(seq "$per"); do
      now_ns s
      # A run that hangs (Slurm 22.05's PMIx plugin does, now and then, over
      # 32 emulated nodes) is counted and left out of the median.
      out=$(mpi_step "$id" "$n" "$WORK/mpi_allreduce" 2>&1)
      if [ $? -eq 124 ]; then
        hung=$((hung + 1))
        echo "mpi: $SYS, $n ranks, run $i: no end within 120 s" >&2
        continue
      fi
      now_ns e
      if [ "$(grep -c ' ok sum=' <<<"$out")" -ne "$n" ]; then
        echo "mpi: $SYS, $n ranks, run $i: not $n ok lines: $out" >&2
        return 1
      fi
      echo $((e - s)) >>"$WORK/mpi-$n"
    done
    if [ -s "$WORK/mpi-$n" ]; then
      record "mpi_${n}r_p50_ms" "$(ms "$(median "$WORK/mpi-$n")")" "n=$((per - hung)), hung=$hung"
    else
      record "mpi_${n}r_p50_ms" n/a "every run hung"
    fi
  done
  : >"$WORK/mpi-true"
  for i in $(seq "$per"); do
    now_ns s
    mpi_step "$id" 32 true >/dev/null 2>&1 ||
      { echo "mpi: $SYS: srun --mpi=pmix true over 32 nodes failed" >&2; return 1; }
    now_ns e
    echo $((e - s)) >>"$WORK/mpi-true"
  done
  record "mpi_servers_32n_p50_ms" "$(ms "$(median "$WORK/mpi-true")")" "n=$per"
  "${SYS}_cancel_all"
}

# run_set PARTS...: dispatch:JOBS; throughput:JOBS (every mode, both
# figures); submit:JOBS (every mode, submission rate only); e2e:MODE:JOBS (one
# mode, both figures); placement.
run_set() {
  local part mode
  # The machine's load average around each part, since other work on a shared
  # machine changes what the figures mean.
  record load_average_at_start "$(cut -d' ' -f1 /proc/loadavg)" "$*"
  for part in "$@"; do
    case $part in
      dispatch:*) measure_dispatch "${part#*:}" || return 1 ;;
      step:*) measure_step "${part#*:}" || return 1 ;;
      throughput:*)
        for mode in seq 4c array; do measure_throughput "$mode" "${part#*:}" || return 1; done ;;
      submit:*)
        for mode in seq 4c array; do measure_throughput "$mode" "${part#*:}" submit || return 1; done ;;
      e2e:*:*) mode=${part#e2e:}; measure_throughput "${mode%%:*}" "${mode#*:}" || return 1 ;;
      placement) measure_placement || return 1 ;;
      mpi:*) measure_mpi "${part#*:}" || return 1 ;;
    esac
  done
}

for system in $systems; do
  case $system in
    cohort)
      SYS=cohort PROFILE=
      cohort_cluster_conf
      say "starting the controller and one agent emulating 64 nodes"
      start_cluster "$WORK/cluster.conf" "$WORK/topology.conf"
      COHORT_UP=1
      { run_set $(wanted dispatch && echo "dispatch:$dispatch_jobs") \
          $(wanted step && echo "step:$step_jobs") $(wanted throughput && echo "throughput:$jobs") \
          $(wanted placement && echo placement) $(wanted mpi && echo "mpi:$mpi_runs") &&
        { ! wanted queue || { fill_queue && measure_queue; }; }; } ||
        { echo "side by side: the Cohort set failed; logs in $WORK" >&2; KEEP_WORK=1; exit 1; }
      cohort_stop
      ;;
    slurm)
      SYS=slurm
      if [ "$(id -u)" -ne 0 ]; then
        echo "side by side: Slurm left out: its slurmd must run as root; run as root (sudo make bench)" >&2
        continue
      fi
      bash "$root/bench/peers/slurm/install.sh" || { echo "side by side: Slurm not installed" >&2; exit 1; }
      current=${profiles%% *}
      PROFILE=$current
      say "starting slurmctld and 64 slurmd"
      slurm_start "$WORK/slurm" "$current" || { KEEP_WORK=1; exit 1; }
      use_profile() {
        PROFILE=$1
        [ "$PROFILE" = "$current" ] && return 0
        say "switching profile"
        slurm_profile "$PROFILE" && current=$PROFILE
      }
      for profile in $profiles; do
        use_profile "$profile" || { KEEP_WORK=1; exit 1; }
        set_parts=()
        wanted dispatch && set_parts+=("dispatch:$dispatch_jobs")
        wanted step && set_parts+=("step:$step_jobs")
        if [ "$PROFILE" = guide ] && [ -z "${SBS_GUIDE_FULL:-}" ]; then
          wanted throughput && set_parts+=("submit:$jobs" "e2e:array:${SBS_GUIDE_JOBS:-100}")
        else
          wanted throughput && set_parts+=("throughput:$jobs")
          wanted placement && set_parts+=(placement)
          # A step's launch does not wait for the scheduler: one profile.
          wanted mpi && set_parts+=("mpi:$mpi_runs")
        fi
        run_set "${set_parts[@]}" ||
          { echo "side by side: the Slurm set ($PROFILE) failed; logs in $WORK" >&2; KEEP_WORK=1; exit 1; }
      done
      # The large queue is filled once and measured in each profile in turn.
      if wanted queue; then
        fill_queue || { echo "side by side: filling Slurm's queue failed" >&2; KEEP_WORK=1; exit 1; }
        for profile in $current ${profiles/$current/}; do
          use_profile "$profile" && measure_queue || { KEEP_WORK=1; exit 1; }
        done
      fi
      slurm_stop
      ;;
    *) echo "side by side: unknown system '$system' in SBS_SYSTEMS; use cohort and slurm" >&2; exit 2 ;;
  esac
done

bash "$root/bench/side_by_side_report.sh" "$results" "$out/side-by-side.json"
