#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Open MPI's mpirun inside an allocation, as users run it under Slurm: it
# reads the allocation from SLURM_* and starts its daemons (orted) with
# `srun --ntasks-per-node=1 --kill-on-bad-exit --mpi=none --ntasks=N …`,
# without -N. A tiny C program built here with mpicc all-reduces over
# 2 nodes x 2 ranks inside an sbatch job and inside `salloc -N 2`; a rank
# that calls MPI_Abort fails its job with the abort's status.
#
# Every node of the test cluster is an emulated one on this machine, so
# Open MPI's shared-memory transport would see all four ranks as local to
# each other under four host names: the ranks talk over TCP on the loopback
# (btl self,tcp) and its daemons call back over it too.
source "$(dirname "$0")/lib.sh"
command -v mpicc >/dev/null && command -v mpirun >/dev/null || {
  fail "no mpicc or mpirun: run scripts/install-deps.sh (it installs openmpi-bin, libopenmpi-dev)"
  finish_test
}
mpicc -O1 -o "$WORK/allreduce" "$ROOT/tests/data/mpi/allreduce.c" ||
  { fail "mpicc could not build tests/data/mpi/allreduce.c"; finish_test; }

SLURM_BIN=$BIN/cli/slurm
[ -x "$SLURM_BIN/srun" ] || { fail "no $SLURM_BIN/srun: the build makes the links"; finish_test; }
export PATH="$SLURM_BIN:$BIN/cli:$PATH"
# Open MPI refuses root unless told twice; CI runs the tests as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# Nothing of the machine's own Slurm, if it has one, may leak in.
unset SLURM_JOB_ID SLURM_JOBID SLURM_NODELIST SLURM_CONF

start_cluster

# four_ranks NAME OUTPUT: the output holds one ok line from each of 4 ranks.
four_ranks() {
  local name=$1 out=$2 rank missing=""
  for rank in 0 1 2 3; do
    [ "$(grep -c "^rank $rank/4 on .* ok sum=6$" <<<"$out")" -eq 1 ] || missing+=" $rank"
  done
  if [ -n "$missing" ] || [ "$(grep -c '^rank ' <<<"$out")" -ne 4 ]; then
    fail "$name: not one ok line from each of 4 ranks (missing:${missing:- none}): $out"
    return 1
  fi
}

# batch NAME SCRIPT_BODY: runs it as a 2-node batch job; prints its id.
batch() {
  local name=$1 script=$WORK/$1.sh
  printf '#!/bin/bash\n#SBATCH -N 2 --ntasks-per-node=2\n%s\n' "$2" >"$script"
  chmod +x "$script"
  submit -o "$WORK/$name-%j.out" "$script"
}

id=$(batch mpirun "mpirun -n 4 $WORK/allreduce")
if [ -z "$id" ]; then
  fail "mpirun: the batch script was refused"
elif ! wait_until 120 finished "$id"; then
  fail "mpirun: job $id did not end: $(cat "$WORK/mpirun-$id.out")"
elif out=$(cat "$WORK/mpirun-$id.out") && [ "$(job_state "$id")" != COMPLETED ]; then
  fail "mpirun: job $id is $(job_state "$id"): $out"
elif four_ranks mpirun "$out"; then
  pass "mpirun -n 4 in a 2-node sbatch job: its daemons started by srun, 4 ranks all-reduced"
fi

out=$(cd "$WORK" && timeout 120 salloc -N 2 --ntasks-per-node=2 mpirun -n 4 "$WORK/allreduce" 2>&1)
status=$?
if [ "$status" -ne 0 ]; then
  fail "salloc -N 2 mpirun: exit $status: $out"
elif four_ranks salloc "$out"; then
  pass "salloc -N 2 mpirun -n 4 from the submit host: 4 ranks on 2 nodes all-reduced"
fi

id=$(batch abort "MPI_TEST_ABORT=2 mpirun -x MPI_TEST_ABORT -n 4 $WORK/allreduce")
if [ -z "$id" ]; then
  fail "MPI_Abort: the batch script was refused"
elif ! wait_until 120 finished "$id"; then
  fail "MPI_Abort: job $id did not end: $(cat "$WORK/abort-$id.out")"
elif [ "$(job_state "$id")" != FAILED ]; then
  fail "MPI_Abort: job $id is $(job_state "$id"), not FAILED: $(cat "$WORK/abort-$id.out")"
elif ! grep -q "rank 2 aborts" "$WORK/abort-$id.out"; then
  fail "MPI_Abort: rank 2's message is not in the output: $(cat "$WORK/abort-$id.out")"
else
  pass "a rank's MPI_Abort ends the job FAILED with its message in the output"
fi
finish_test
