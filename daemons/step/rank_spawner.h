// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launch_file.h"
#include "step_container.h"
#include "step_events.h"

/// Starting one launch's ranks as processes: cohort-stepd's fork and exec.
namespace cohort::step {

/// A rank's stdio when its output is streamed (a step's, StepIo): the ends
/// of pipes the child puts on 0, 1 and 2 instead of /dev/null and its files.
/// -1 for `in`: /dev/null.
struct RankStdio {
  int in = -1;
  int out = -1;
  int err = -1;
  /// The rank's end of its PMI socket (srun --mpi=pmi2), which it finds as
  /// PMI_FD (pmi_host.h's kPmiFd); -1: none.
  int pmi = -1;
  /// A pseudo-terminal's device (--pty): the rank starts a session of its
  /// own with it as its controlling terminal and its stdin, stdout and
  /// stderr; the other fields are unused.
  std::string pty;
};

/// What SpawnRanks did.
struct SpawnResult {
  absl::Status status;      ///< OK, or why not every rank runs, starting with the node's name
  pid_t process_group = 0;  ///< the first rank's pid; 0 when none started
  std::vector<RankStartedEvent> started;  ///< in rank order
};

/// Starts every rank of `file` with fork and exec: all in one new process
/// group that the first rank leads (setpgid in parent and child), in the
/// launch's cgroup when it has one (the child writes its pid to
/// cgroup.procs), stdin from /dev/null, default signal dispositions, an
/// empty signal mask and no descriptors beyond 0-2. With RunAs::kOwner the
/// owner is looked up first (LookupAccount: an unknown uid fails the launch)
/// and each child becomes the owner (setgroups, setgid, setuid, then checks
/// it cannot go back) before it touches a file, and the rank's environment
/// gets the owner's HOME, USER, LOGNAME and SHELL. Then, as the rank's user,
/// the child creates the work dir (mkdir -p) and enters it, opens its
/// stdout and stderr files itself (O_APPEND, and O_TRUNC when the rank's
/// mode says it truncates; so nothing of a rank's output passes through the
/// stepd) and looks a bare program name up in the job's PATH (not the
/// stepd's), as execvp would in the job's environment. Waits for each exec
/// to succeed or fail (a close-on-exec pipe), so an unrunnable program fails
/// the launch. Calls `on_started` after each rank's exec. Stops at the first
/// failure, leaving the ranks started running: the caller kills and reaps
/// them. Failure codes: NotFound (no such program, folder or user),
/// PermissionDenied, FailedPrecondition, or the errno's code otherwise.
///
/// Forks: call only from a single-threaded process (cohort-stepd), where the
/// child may do anything before exec.
/// With `stdio` (one per rank of the file, in order) the ranks' stdio are
/// those pipes, and no output file is opened. With `container`, each child
/// opens its output files as the owner first, then enters the container's
/// mount namespace (setns), becomes the owner (and root of a user namespace
/// of its own with remap_root), and creates, enters and searches the
/// container's working directory and PATH instead of the job's.
[[nodiscard]] SpawnResult SpawnRanks(const LaunchFile& file,
                                     const std::function<void(const RankStartedEvent&)>& on_started,
                                     std::span<const RankStdio> stdio = {},
                                     const ContainerEntry* container = nullptr);

}  // namespace cohort::step
