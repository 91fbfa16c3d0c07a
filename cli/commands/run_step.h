// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "cohort/v1/cohort.pb.h"
#include "format/rank_output.h"
#include "spec/job_options.h"
#include "transport/controller_client.h"
#include "transport/step_io_server.h"

/// `cohort run` inside a job's allocation: the command becomes a step of the
/// job (as `srun` inside `sbatch` or `salloc`), not a job of its own.
namespace cohort::cli {

struct StepRun {
  std::string job;  ///< the allocation: "12", or "12_3" for an array task
  v1::StepSharing sharing = v1::STEP_WHOLE_NODES;
  RankLabels labels = RankLabels::kNone;
  int stdin_rank = 0;  ///< the step's rank that reads our stdin (--input); -1: none
  StepTerminal terminal = StepTerminal::kNone;  ///< --pty: one task, on a terminal
  std::string mpi;  ///< --mpi: "pmix" or "none"; empty: the cluster's MpiDefault
};

/// Starts `command` as a step of `step.job` with the options that shape a
/// step (-N, -n, --ntasks-per-node, -c, --gpus-per-node, -w, -o, -e, -D,
/// --export, -J), waiting while the allocation is busy with other steps
/// ("step creation temporarily disabled"); then prints its ranks' output
/// and returns its exit status. Without -o and -e, the ranks' output comes
/// over the network (StepIoServer) and stdin goes to `step.stdin_rank`;
/// with either, the ranks write files as `cohort run` outside a job has
/// them. It returns 0 when it completed, its exit code when a
/// rank failed (128 + the signal when one was killed), 1 when it was
/// cancelled or could not start. Ctrl-C sends SIGINT to the step's ranks;
/// a second within a second cancels the step; a third stops waiting (130).
/// Options that shape jobs, not steps (-t, -p, -A, --qos, --mem, …) are
/// warned about and ignored; --array, --dependency, --hold and --test-only
/// are refused (2).
[[nodiscard]] int RunStep(ControllerClient& client, const JobOptions& options, const StepRun& step,
                          const std::vector<std::string>& command);

/// Sets SLURM_LAUNCH_NODE_IPADDR and SLURM_SRUN_COMM_HOST in `env` (over
/// any the caller inherited from an outer srun) to `host`: the address of
/// this host the nodes reach it by, as Slurm's srun sets them for its tasks.
void SetLaunchHost(google::protobuf::RepeatedPtrField<v1::EnvVar>& env, const std::string& host);

}  // namespace cohort::cli
