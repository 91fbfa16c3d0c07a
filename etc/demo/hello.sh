#!/bin/sh
# A first multi-node job. The script runs once, on the first node of its
# allocation (the batch step); `cohort run` inside it starts a step over every
# node of the allocation, and every rank of the step says where it runs, with
# the launch environment of docs/environment.md.
#SBATCH --job-name=hello
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-node=2
#SBATCH --time=5
echo "batch script on $COHORT_NODENAME: job $SLURM_JOB_ID has $SLURM_NNODES nodes ($SLURM_JOB_NODELIST)," \
     "$SLURM_NTASKS tasks"
cohort run -- sh -c 'echo "rank $RANK of $WORLD_SIZE on $COHORT_NODENAME (node rank $NODE_RANK, \
local rank $LOCAL_RANK), master $MASTER_ADDR:$MASTER_PORT, GPUs $CUDA_VISIBLE_DEVICES"; sleep 2'
