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
if [ -f "$ckpt" ]; then
  echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: resuming from $ckpt ($(cat "$ckpt"))"
  sleep 1
  echo "task $SLURM_ARRAY_TASK_ID: done"
  exit 0
fi
echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: training (job $SLURM_JOB_ID)"
checkpoint() {
  echo "task $SLURM_ARRAY_TASK_ID on $COHORT_NODENAME: got SIGUSR1 (preemption warning); saving a checkpoint"
  echo "step 1200" >"$ckpt"
  cohort checkpoint-done
  exit 0
}
trap checkpoint USR1
sleep "${SWEEP_SECONDS:-20}" &
wait $!
echo "task $SLURM_ARRAY_TASK_ID: done"
