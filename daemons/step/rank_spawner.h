// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "launch_file.h"
#include "step_events.h"

/// Starting one launch's ranks as processes: cohort-stepd's fork and exec.
namespace cohort::step {

/// What SpawnRanks did.
struct SpawnResult {
  absl::Status status;      ///< OK, or why not every rank runs, starting with the node's name
  pid_t process_group = 0;  ///< the first rank's pid; 0 when none started
  std::vector<RankStartedEvent> started;  ///< in rank order
};

/// Starts every rank of `file` with fork and exec: all in one new process
/// group that the first rank leads (setpgid in parent and child), stdin from
/// /dev/null, stdout and stderr to the rank's files (opened once per launch,
/// O_APPEND unless the file says truncate, so ranks and nodes can share one),
/// the work dir and environment of the file, default signal dispositions, an
/// empty signal mask and no descriptors beyond 0-2. A bare program name is
/// looked up in the job's PATH (not the stepd's), as execvp would in the
/// job's environment. Waits for each exec to succeed or fail (a close-on-exec
/// pipe), so an unrunnable program fails the launch. Calls `on_started`
/// after each rank's exec. Stops at the first failure, leaving the ranks
/// started running: the caller kills and reaps them. Failure codes:
/// NotFound (no such program or folder), PermissionDenied,
/// FailedPrecondition, or the errno's code otherwise.
///
/// Forks: call only from a single-threaded process (cohort-stepd), where the
/// child may do anything before exec; setuid and CPU binding will go there.
[[nodiscard]] SpawnResult SpawnRanks(
    const LaunchFile& file, const std::function<void(const RankStartedEvent&)>& on_started);

}  // namespace cohort::step
