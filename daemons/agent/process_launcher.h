// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cohort/launch_env.h"

/// Starting a job's ranks on one node as processes.
namespace cohort::agent {

/// The most ranks one node starts for one job; a launch asking for more is
/// refused rather than allowed to stall the agent's loop.
inline constexpr int kMaxRanksPerNode = 1024;

/// One job's launch on one node, in the agent's terms.
struct LaunchPlan {
  launch::LaunchContext context;  ///< node_name, ranks and environment
  std::vector<std::string> argv;  ///< the program and its arguments
  std::string script;             ///< a batch script's text; when set it replaces argv[0]
  std::string work_dir;           ///< where the ranks start; must exist
  std::string output;             ///< stdout pattern (ExpandOutputPattern); empty: cohort-%j.out
  std::string error;              ///< stderr pattern; empty: the same file as stdout
};

/// One rank started.
struct StartedRank {
  int rank = 0;  ///< global
  pid_t pid = 0;
};

/// What Spawn did. On failure the ranks it had already started were sent
/// SIGKILL and are listed in `ranks`: the caller still reaps them.
struct SpawnResult {
  absl::Status status;             ///< OK, or why, starting with the node's name
  pid_t process_group = 0;         ///< the first rank's pid; 0 when none started
  std::vector<StartedRank> ranks;  ///< in rank order
  std::string script_path;         ///< the spooled script; empty: none left behind
};

/// Starts ranks with posix_spawn: each local rank of a launch in one new
/// process group (the first rank leads it), stdin from /dev/null, stdout and
/// stderr appended to the job's files (opened O_APPEND so ranks and nodes can
/// share one), the working directory and environment of the plan, default
/// signal dispositions, an empty signal mask and no descriptors beyond 0-2.
/// A bare program name is looked up in the job's PATH (not the agent's), as
/// execvp would in the job's environment. Runs on the agent's loop thread; it
/// does not wait for children (the caller reaps them). Not thread-safe.
class ProcessLauncher {
 public:
  explicit ProcessLauncher(std::string spool_dir);

  /// Creates the spool folder (mode 0700) or checks the existing one is a
  /// folder this user owns and others cannot write. Returns
  /// FailedPrecondition or the errno's status with the path otherwise.
  [[nodiscard]] absl::Status PrepareSpool() const;

  /// Starts every local rank of `plan`, or none: when one fails, the ones
  /// started are killed. Failure codes: InvalidArgument (a malformed plan),
  /// NotFound (no such program or folder), PermissionDenied, FailedPrecondition,
  /// or the errno's code otherwise.
  [[nodiscard]] SpawnResult Spawn(const LaunchPlan& plan) const;

  /// Removes a script Spawn left in the spool; errors are ignored (a stale
  /// script is harmless and overwritten by the next launch of that name).
  static void RemoveScript(const std::string& path);

 private:
  std::string spool_dir_;
};

}  // namespace cohort::agent
