#!/bin/sh
# One task of a hyper-parameter sweep that checkpoints when preempted: on
# SIGUSR1 (the preemption warning) it saves its state, tells the scheduler
# with `cohort checkpoint-done`, and exits; requeued, it resumes from the
# checkpoint.
#SBATCH --job-name=sweep
#SBATCH --gpus-per-node=8
#SBATCH --time=5
#SBATCH --open-mode=append
ckpt="checkpoint-$SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID"
checkpoint() {
  echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: got SIGUSR1 (preemption warning); saving a checkpoint"
  echo "step 1200" >"$ckpt"
  cohort checkpoint-done
  exit 0
}
# First of all, so that a warning never finds the task without its handler.
trap checkpoint USR1
if [ -f "$ckpt" ]; then
  echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: resuming from $ckpt ($(cat "$ckpt"))"
  sleep 1
  echo "task $SLURM_ARRAY_TASK_ID: done"
  exit 0
fi
echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: training (job $SLURM_JOB_ID)"
sleep "${SWEEP_SECONDS:-20}" &
wait $!
echo "task $SLURM_ARRAY_TASK_ID: done"
