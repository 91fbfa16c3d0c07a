// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/step_ledger.h"
#include "cohort/engine/job.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

/// Job steps: `cohort run` inside a running job's allocation starts a step
/// over some of its nodes, itself a gang (every rank of the step starts, or
/// none does). What each step holds is the allocation's, never the pool's:
/// the job's grants stay committed for its whole run. Stateless: a job's
/// steps live in the job (Job::run.steps) and its ledger is rebuilt from them.
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
  /// A rank of a running step exited on node rank `node_rank` of the
  /// allocation. The first failure stops the step's other ranks; once every
  /// rank has exited the step ends, COMPLETED or FAILED, and what it held is
  /// free again. Unknown steps, nodes outside the step and exits past a
  /// node's count are ignored (an agent can race the engine).
  struct RankExit {
    int node_rank = 0;      ///< in the allocation
    std::string_view node;  ///< its name, for the step's reason
    int exit_code = 0;
    int signal = 0;
  };
  static void RankExited(Job& job, int step, const RankExit& exit, Millis now, Effects& effects);
  /// How one node's launch of a step ended as a whole: failed to start
  /// (`reason`), finished (an agent's report of it), or vanished. Its ranks
  /// all count as exited; a failure fails the step as a rank's would.
  struct NodeEnd {
    int ranks_ok = 0;
    bool failed = false;
    int exit_code = 0;
    int signal = 0;
    std::string reason;  ///< set for a launch that failed or vanished
  };
  static void NodeEnded(Job& job, int step, int node_rank, const NodeEnd& end, Millis now,
                        Effects& effects);
  /// The running steps of `job` with ranks on node rank `node_rank`.
  [[nodiscard]] static std::vector<int> RunningOn(const Job& job, int node_rank);
  /// Signals a running step's ranks; signal 0 stops them (SIGTERM, then
  /// SIGKILL) and the step ends CANCELLED once they have exited.
  [[nodiscard]] static absl::Status Signal(Job& job, int step, int signal, Millis now,
                                           Effects& effects);
  /// The job stopped: its running steps end with it, CANCELLED. On a
  /// requeue the steps go with the attempt.
  static void EndWithJob(Job& job, Millis now);
};

/// Where a step's MASTER_PORT starts from: its job's port moved up by the
/// step's id, within 20000-39999 (Lifecycle::FreePort then skips the ports
/// taken on its first node).
[[nodiscard]] int StepPortBase(int job_port, int step);

}  // namespace cohort::engine
