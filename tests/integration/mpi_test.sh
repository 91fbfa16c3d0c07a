#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# MPI jobs as users run them under Slurm, with Debian's Open MPI 4.1 and
# MPICH 4.0:
# - `srun --mpi=pmix ./app` in a batch script: cohort-stepd's PMIx server
#   wires the ranks up, fences between nodes over the stepds' fence tree;
#   the same for mpi4py; a rank's MPI_Abort and a rank killed before the
#   first fence end the job FAILED, never hung.
# - `srun --mpi=pmi2 ./app` with MPICH: a PMI server in each stepd; and
#   PMI-2's own wire protocol through Slurm's libpmi2 (Intel MPI's client).
# - -o with --mpi=pmix; 12 nodes, whose fences travel a two-level tree.
# - Open MPI's mpirun inside an allocation: it reads the allocation from
#   SLURM_* and starts its daemons (orted) with `srun --ntasks-per-node=1
#   --kill-on-bad-exit --mpi=none --ntasks=N …`, without -N; inside an
#   sbatch job and inside `salloc -N 2`.
# A tiny C program built here with mpicc all-reduces over 2 nodes x 2 ranks.
#
# Every node of the test cluster is an emulated one on this machine, so
# Open MPI's shared-memory transport would see all four ranks as local to
# each other under four host names: the ranks talk over TCP on the loopback
# (btl self,tcp) and its daemons call back over it too.
source "$(dirname "$0")/lib.sh"
# Both libraries are installed side by side: each by its own names.
for tool in mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich; do
  command -v "$tool" >/dev/null || {
    fail "no $tool: run scripts/install-deps.sh (it installs openmpi-bin, libopenmpi-dev, mpich)"
    finish_test
  }
done
mpicc.openmpi -O1 -o "$WORK/allreduce" "$ROOT/tests/data/mpi/allreduce.c" ||
  { fail "mpicc.openmpi could not build tests/data/mpi/allreduce.c"; finish_test; }
mpicc.mpich -O1 -o "$WORK/allreduce_mpich" "$ROOT/tests/data/mpi/allreduce.c" ||
  { fail "mpicc.mpich could not build tests/data/mpi/allreduce.c"; finish_test; }
cc -O1 -o "$WORK/pmi2_cards" "$ROOT/tests/data/mpi/pmi2_cards.c" -lpmi2 ||
  { fail "cc could not build tests/data/mpi/pmi2_cards.c with libpmi2-0-dev"; finish_test; }

# The ranks' python3: the first on PATH, else the system's (a pyenv or venv
# python3 before it lacks Debian's python3-mpi4py).
mkdir -p "$WORK/bin"
if ! python3 -c 'import mpi4py' 2>/dev/null && /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  ln -s /usr/bin/python3 "$WORK/bin/python3"
fi

SLURM_BIN=$BIN/cli/slurm
[ -x "$SLURM_BIN/srun" ] || { fail "no $SLURM_BIN/srun: the build makes the links"; finish_test; }
export PATH="$SLURM_BIN:$WORK/bin:$BIN/cli:$PATH"
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

# ended NAME ID STATE: job ID ended STATE within two minutes; its output
# in $out. Fails with the output otherwise.
ended() {
  local name=$1 id=$2 want=$3
  out=""
  if [ -z "$id" ]; then
    fail "$name: the batch script was refused"
    return 1
  fi
  if ! wait_until 120 finished "$id"; then
    fail "$name: job $id did not end: $(cat "$WORK/$name-$id.out")"
    return 1
  fi
  out=$(cat "$WORK/$name-$id.out")
  if [ "$(job_state "$id")" != "$want" ]; then
    fail "$name: job $id is $(job_state "$id"), not $want: $out"
    return 1
  fi
}

# --- srun --mpi=pmix
id=$(batch pmix "srun --mpi=pmix $WORK/allreduce")
if ended pmix "$id" COMPLETED && four_ranks "srun --mpi=pmix" "$out"; then
  pass "srun --mpi=pmix: 4 ranks on 2 nodes wired up by the stepds' PMIx servers, all-reduced"
fi

id=$(batch mpi4py "srun --mpi=pmix python3 -c 'from mpi4py import MPI
c = MPI.COMM_WORLD
print(f\"mpi4py {c.rank}/{c.size} sum={c.allreduce(c.rank)}\")'")
if ended mpi4py "$id" COMPLETED; then
  if [ "$(grep -c '^mpi4py [0-3]/4 sum=6$' <<<"$out")" -eq 4 ]; then
    pass "mpi4py under srun --mpi=pmix: 4 ranks all-reduced"
  else
    fail "mpi4py: not one line from each of 4 ranks: $out"
  fi
fi

id=$(batch pmix-abort "MPI_TEST_ABORT=2 srun --mpi=pmix $WORK/allreduce")
if ended pmix-abort "$id" FAILED; then
  if grep -q "rank 2 aborts" <<<"$out" && grep -q "rank 2 called PMIx_Abort" <<<"$out"; then
    pass "a rank's MPI_Abort under srun --mpi=pmix fails the job, its message in the output"
  else
    fail "srun --mpi=pmix MPI_Abort: the rank's messages are not in the output: $out"
  fi
fi

# PMIx's direct modex: with Open MPI's asynchronous modex MPI_Init fences
# without the ranks' data, and each rank's server gets a remote rank's
# data from that rank's node when it first talks to it.
id=$(batch pmix-dmodex "OMPI_MCA_pmix_base_async_modex=1 OMPI_MCA_pmix_base_collect_data=0 \
srun --mpi=pmix $WORK/allreduce")
if ended pmix-dmodex "$id" COMPLETED && four_ranks "srun --mpi=pmix, direct modex" "$out"; then
  pass "srun --mpi=pmix with Open MPI's async modex: remote ranks' data by direct modex"
fi

# Rank 1 dies before MPI_Init: the others wait in the first fence until the
# step stops them, as a failing rank stops every other (-K).
id=$(batch pmix-killed "srun --mpi=pmix sh -c '[ \$SLURM_PROCID = 1 ] && kill -9 \$\$; exec $WORK/allreduce'")
if ended pmix-killed "$id" FAILED; then
  pass "a rank killed before the first fence fails the job; the others are not left waiting"
fi

# Rank 3 is late for the first fence (it sleeps): after SLURM_PMIX_TIMEOUT
# the fence fails on every node, naming the node that never arrived, and
# the stepds end the step (its ranks killed, not left to crash in the next
# fence), so the job fails rather than wait for it.
id=$(batch pmix-late "export SLURM_PMIX_TIMEOUT=3
srun --mpi=pmix sh -c '[ \$SLURM_PROCID = 3 ] && sleep 120; exec $WORK/allreduce'")
if ended pmix-late "$id" FAILED; then
  if grep -q "PMIx fence 0 timed out after 3 s (SLURM_PMIX_TIMEOUT): node02 (ranks 2-3) never arrived" <<<"$out"; then
    if grep -q "PMIx fence 1 timed out\|Segmentation fault" <<<"$out"; then
      fail "srun --mpi=pmix, a late rank: the step went on past its failed fence: $out"
    else
      pass "a fence a rank is late for fails after SLURM_PMIX_TIMEOUT, naming its node and ranks"
    fi
  else
    fail "srun --mpi=pmix, a late rank: the fence's failure is not said: $out"
  fi
fi

# --- srun --mpi=pmi2: MPICH's own PMI client (PMI-1's line protocol) over
# PMI_FD, its barriers between nodes as PMIx's fences go.
id=$(batch pmi2 "srun --mpi=pmi2 $WORK/allreduce_mpich")
if ended pmi2 "$id" COMPLETED && four_ranks "srun --mpi=pmi2" "$out"; then
  pass "srun --mpi=pmi2: MPICH's 4 ranks on 2 nodes wired up by the stepds' PMI servers"
fi

# PMI-2's own wire protocol (cmd=fullinit, kvs-fence, node attributes)
# through Slurm's client library, which Intel MPI loads.
id=$(batch pmi2-wire "srun --mpi=pmi2 $WORK/pmi2_cards")
if ended pmi2-wire "$id" COMPLETED; then
  if [ "$(grep -c '^pmi2 rank [0-3]/4 ok$' <<<"$out")" -eq 4 ]; then
    pass "srun --mpi=pmi2 with Slurm's libpmi2: PMI-2's wire protocol, 4 ranks on 2 nodes"
  else
    fail "srun --mpi=pmi2 with libpmi2: not one ok line from each of 4 ranks: $out"
  fi
fi

# Rank 1 sends a line no PMI client sends, reads the refusal, then starts
# MPI as the others do: the server keeps serving every rank.
id=$(batch pmi2-bogus "srun --mpi=pmi2 sh -c 'if [ \$SLURM_PROCID = 1 ]; then
  printf \"cmd=bogus\\n\" >&\$PMI_FD; read -r reply <&\$PMI_FD; echo \"pmi said: \$reply\"; fi
  exec $WORK/allreduce_mpich'")
if ended pmi2-bogus "$id" COMPLETED && four_ranks "srun --mpi=pmi2, a bogus line" "$out"; then
  if grep -q "^pmi said: cmd=bogus rc=-1 msg=cohort-stepd_serves_PMI-1" <<<"$out"; then
    pass "a line no PMI client sends is refused with a message; every rank is still served"
  else
    fail "srun --mpi=pmi2, a bogus line: no refusal in the output: $out"
  fi
fi

id=$(batch pmi2-abort "MPI_TEST_ABORT=1 srun --mpi=pmi2 $WORK/allreduce_mpich")
if ended pmi2-abort "$id" FAILED; then
  if grep -q "rank 1 aborts" <<<"$out" && grep -q "rank 1 called PMI_Abort with status 7" <<<"$out" &&
    grep -q "failed with exit code 7" <<<"$out"; then
    pass "MPICH's MPI_Abort under srun --mpi=pmi2 fails the job with its status and message"
  else
    fail "srun --mpi=pmi2 MPI_Abort: the rank's messages are not in the output: $out"
  fi
fi

# -o with --mpi=pmix: each rank writes its own file; the stream to srun
# still starts the wire-up.
id=$(batch pmix-files "srun --mpi=pmix -o $WORK/pmix-files-%t.out $WORK/allreduce")
if ended pmix-files "$id" COMPLETED; then
  files=$(cat "$WORK"/pmix-files-[0-3].out 2>/dev/null)
  if four_ranks "srun --mpi=pmix -o" "$files" && ! grep -q '^rank ' <<<"$out"; then
    pass "srun --mpi=pmix -o FILE-%t: 4 ranks wired up, each rank's output in its own file"
  elif grep -q '^rank ' <<<"$out"; then
    fail "srun --mpi=pmix -o: the ranks' output reached srun's, not the files: $out"
  fi
fi

# 12 nodes: the fences travel a tree of two levels (8 children under the
# first node, 3 under the second), not a star.
script=$WORK/pmix-tree.sh
printf '#!/bin/bash\n#SBATCH -N 12 --ntasks-per-node=1\nsrun --mpi=pmix %s\n' \
  "$WORK/allreduce" >"$script"
id=$(submit -o "$WORK/pmix-tree-%j.out" "$script")
if ended pmix-tree "$id" COMPLETED; then
  if [ "$(grep -c '^rank [0-9]*/12 on .* ok sum=66$' <<<"$out")" -eq 12 ]; then
    pass "srun --mpi=pmix over 12 nodes: fences through a two-level tree of stepds, all-reduced"
  else
    fail "srun --mpi=pmix over 12 nodes: not 12 ok lines: $out"
  fi
fi

# From the submit host, as on a login node: srun makes the allocation and
# runs the command as a step of it, wired up by the stepds' servers.
out=$(cd "$WORK" && timeout 120 srun -N 2 --ntasks-per-node=2 --mpi=pmix "$WORK/allreduce" 2>&1)
status=$?
if [ "$status" -ne 0 ]; then
  fail "srun -N 2 --mpi=pmix from the submit host: exit $status: $out"
elif four_ranks "srun --mpi=pmix outside a job" "$out"; then
  pass "srun -N 2 --mpi=pmix from the submit host: an allocation, a step, 4 ranks wired up"
fi

# --- Open MPI's mpirun inside an allocation
id=$(batch mpirun "mpirun.openmpi -n 4 $WORK/allreduce")
if ended mpirun "$id" COMPLETED && four_ranks mpirun "$out"; then
  pass "mpirun -n 4 in a 2-node sbatch job: its daemons started by srun, 4 ranks all-reduced"
fi

# MPICH's own launcher: Hydra sees the allocation and starts its proxies
# with srun (its Slurm bootstrap), one per node.
id=$(batch hydra "mpiexec.mpich -n 4 $WORK/allreduce_mpich")
if ended hydra "$id" COMPLETED && four_ranks "mpiexec.mpich" "$out"; then
  pass "mpiexec.mpich -n 4 in a 2-node sbatch job: Hydra's proxies started by srun, all-reduced"
fi

out=$(cd "$WORK" && timeout 120 salloc -N 2 --ntasks-per-node=2 mpirun.openmpi -n 4 "$WORK/allreduce" 2>&1)
status=$?
if [ "$status" -ne 0 ]; then
  fail "salloc -N 2 mpirun: exit $status: $out"
elif four_ranks salloc "$out"; then
  pass "salloc -N 2 mpirun -n 4 from the submit host: 4 ranks on 2 nodes all-reduced"
fi

id=$(batch abort "MPI_TEST_ABORT=2 mpirun.openmpi -x MPI_TEST_ABORT -n 4 $WORK/allreduce")
if ended abort "$id" FAILED; then
  if grep -q "rank 2 aborts" <<<"$out"; then
    pass "a rank's MPI_Abort under mpirun ends the job FAILED with its message in the output"
  else
    fail "mpirun MPI_Abort: rank 2's message is not in the output: $out"
  fi
fi
finish_test
