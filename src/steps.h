// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/statusor.h"
#include "cohort/job.h"
#include "cohort/step_ledger.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

/// Job steps: `cohort run` inside a running job's allocation starts a step
/// over some of its nodes, itself a gang (every rank of the step starts, or
/// none does). What each step holds is the allocation's, never the pool's:
/// the job's grants stay committed for its whole run. Stateless: a job's
/// steps live in the job (Job::steps) and its ledger is rebuilt from them.
class Steps {
 public:
  /// What the job's allocation holds, less what its running steps hold.
  [[nodiscard]] static alloc::StepLedger LedgerOf(const Job& job);

  /// Places a step in the running job and launches it on its nodes.
  /// FailedPrecondition when the job is not running, is suspended, or the
  /// step could never fit (what it asks and what the allocation has);
  /// ResourceExhausted when it fits only once running steps end (ask again
  /// then). Returns the step's id.
  [[nodiscard]] static absl::StatusOr<int> Start(Job& job, const alloc::StepRequest& request,
                                                 Millis now, Effects& effects);
  /// A rank of a running step exited. The first failure stops the step's
  /// other ranks; once every rank has exited the step ends, COMPLETED or
  /// FAILED, and what it held is free again. Unknown steps, and ranks past
  /// the step's count, are ignored (an agent can race the engine).
  static void RankExited(Job& job, int step, int exit_code, int signal, Millis now,
                         Effects& effects);
  /// Signals a running step's ranks; signal 0 stops them (SIGTERM, then
  /// SIGKILL) and the step ends CANCELLED once they have exited.
  [[nodiscard]] static absl::Status Signal(Job& job, int step, int signal, Millis now,
                                           Effects& effects);
  /// The job stopped: its running steps end with it, CANCELLED. On a
  /// requeue the steps go with the attempt.
  static void EndWithJob(Job& job, Millis now);
};

}  // namespace cohort::engine
