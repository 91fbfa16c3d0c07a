#!/bin/sh
# A first multi-node job: every rank says where it runs. Each rank runs this
# script with the launch environment (docs/environment.md).
#SBATCH --job-name=hello
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-node=2
#SBATCH --time=5
echo "rank $RANK of $WORLD_SIZE on $COHORT_NODENAME (node rank $NODE_RANK, local rank $LOCAL_RANK)," \
     "master $MASTER_ADDR:$MASTER_PORT, GPUs $CUDA_VISIBLE_DEVICES"
sleep 2
