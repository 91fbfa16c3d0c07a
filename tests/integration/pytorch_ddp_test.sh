#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real PyTorch distributed training (gloo, CPU) as users run it under Slurm:
# a batch script of 2 nodes x 2 ranks whose `srun python3 ddp.py` gives each
# rank RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; and the same
# 4 ranks started by torchrun, once per node through `srun`. Every rank
# all-reduces, trains a tiny DDP model and checks it ends equal to rank 0's.
source "$(dirname "$0")/lib.sh"
DDP=$ROOT/tests/data/pytorch/ddp.py
mkdir -p "$WORK/bin"

# The jobs' python3: the first on PATH, else the system's (a pyenv or venv
# python3 before it may lack Debian's python3-torch).
if ! python3 -c 'import torch' 2>/dev/null; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    ln -s /usr/bin/python3 "$WORK/bin/python3"
  else
    fail "python3 cannot import torch: run scripts/install-deps.sh (it installs python3-torch)"
    finish_test
  fi
fi

# srun inside the jobs: the cohort binary under that name, as the build
# links it.
SLURM_BIN=$BIN/cli/slurm
[ -x "$SLURM_BIN/srun" ] || { fail "no $SLURM_BIN/srun: the build makes the links"; finish_test; }
export PATH="$SLURM_BIN:$WORK/bin:$BIN/cli:$PATH"

start_cluster

# ddp_job NAME: submits the batch script on stdin, waits for its end, checks
# COMPLETED and one `ok` line from each of the 4 ranks (rank R on node R/2,
# local rank R%2); fails once, with the output, and returns 1 otherwise.
ddp_job() {
  local name=$1 script=$WORK/$1.sh id out rank missing=""
  cat >"$script"
  chmod +x "$script"
  id=$(submit -o "$WORK/$name-%j.out" "$script")
  [ -n "$id" ] || { fail "$name: the batch script was refused"; return 1; }
  wait_until 90 finished "$id" || { fail "$name: job $id did not end"; return 1; }
  out=$(cat "$WORK/$name-$id.out")
  [ "$(job_state "$id")" = COMPLETED ] || { fail "$name: job $id is $(job_state "$id"): $out"; return 1; }
  for rank in 0 1 2 3; do
    [ "$(grep -c "^rank $rank/4 local $((rank % 2)) ok allreduce=10$" <<<"$out")" -eq 1 ] ||
      missing+=" $rank"
  done
  if [ -n "$missing" ] || [ "$(grep -c '^rank ' <<<"$out")" -ne 4 ]; then
    fail "$name: not one ok line from each of 4 ranks (missing:${missing:- none}): $out"
    return 1
  fi
}

ddp_job srun <<SCRIPT &&
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=2
srun python3 $DDP
SCRIPT
  pass "srun python3 ddp.py: 4 ranks on 2 nodes all-reduced and trained in lockstep with DDP"

# Static rendezvous: node 0's torchrun hosts the store on the step's
# MASTER_ADDR:MASTER_PORT, the others join it by their node rank.
# Debian bookworm's torch 1.13 on Python 3.11 cannot parse torchrun's own
# default --redirects and --tee 0 (3.11 no longer iterates IntFlag's 0 member)
# and stops with "'NoneType' object has no attribute 'get'"; a mapping for a
# local rank that does not exist means none for every rank, in any version.
export PET_REDIRECTS=9:0 PET_TEE=9:0
ddp_job torchrun <<SCRIPT &&
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=2
srun --ntasks-per-node=1 sh -c 'exec torchrun --nnodes=2 --nproc_per_node=2 \
  --node_rank=\$SLURM_NODEID --master_addr=\$MASTER_ADDR --master_port=\$MASTER_PORT $DDP'
SCRIPT
  pass "srun torchrun, once per node: its 4 ranks all-reduced and trained in lockstep with DDP"
finish_test
