// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/job.h"
#include "pass_state.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

struct EngineCore;

/// Whether a job may be queued (at submission) and tried now (in a pass):
/// partitions' and QOS' rules, holds, dependencies, running-job limits and
/// array throttles.
class Admission {
 public:
  explicit Admission(EngineCore& core) : core_(core) {}

  /// Resolves a request against the configuration: partition, account and
  /// user rules, QOS, time limits, the gang. InvalidArgument names the field
  /// and the fix; PermissionDenied and FailedPrecondition say why not.
  [[nodiscard]] absl::StatusOr<Job> Resolve(JobRequest request) const;
  /// What a resolved job must meet to be queued: dependencies on known jobs,
  /// MaxSubmitJobsPerUser.
  [[nodiscard]] absl::Status CheckQueueing(const Job& job) const;

  /// Whether the job may be tried now; sets its pending reason when not. A
  /// job whose dependency can never hold and that asked to be killed then is
  /// cancelled.
  bool Eligible(Job& job, const PassCounts& counts, Millis now, Effects& effects);
  /// Sets a held job's reason: who holds it and who may release it.
  static void ShowHeld(Job& job, Effects& effects);

 private:
  /// 1: satisfied, 0: waiting, -1: can never be satisfied; `why` says which term.
  int DependencyStatus(Job& job, std::string& why);
  struct Wait {
    PendingReason reason = PendingReason::kNone;
    std::string detail;
  };
  /// The first running-job limit the job would pass; none when none.
  [[nodiscard]] std::optional<Wait> LimitReached(const Job& job, const PassCounts& counts) const;

  EngineCore& core_;
};

}  // namespace cohort::engine
