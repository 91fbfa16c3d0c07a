// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/gang_allocator.h"

/// Jobs as the core sees them, and the one table through which a job's state
/// changes.
namespace cohort {

using JobId = std::int64_t;
/// Wall-clock time as milliseconds since the Unix epoch. The core never reads
/// a clock: the shell passes `now` into every call.
using Millis = std::chrono::milliseconds;

enum class JobState : std::uint8_t {
  kPending,
  kRunning,
  kCompleting,
  kCompleted,
  kFailed,
  kCancelled,
  kTimeout,
  kNodeFail,
};
inline constexpr int kJobStateCount = 8;

/// What happens to a job. Each (state, event) pair has one outcome in
/// Transition(); nothing else changes a job's state.
enum class JobEvent : std::uint8_t {
  kAllocated,       ///< the whole gang was placed and launched
  kRanksSucceeded,  ///< every rank exited 0
  kRankFailed,      ///< a rank exited non-zero or by a signal
  kLaunchFailed,    ///< a node could not start its ranks
  kCancelled,       ///< the owner or an operator cancelled it
  kTimeLimit,       ///< it ran past its time limit
  kNodeLost,        ///< a node of its gang stopped answering
  kAllReleased,     ///< every node has confirmed its ranks are gone
};
inline constexpr int kJobEventCount = 8;

/// Why a job that is stopping stops; decides its final state.
enum class EndCause : std::uint8_t {
  kNone,
  kSuccess,
  kRankFailed,
  kLaunchFailed,
  kCancelled,
  kTimeLimit,
  kNodeLost,
  kNodeLostRequeue,
};

/// The state after `event` in `state`, or nullopt when the event does not
/// apply there (it is then ignored). A stopping job (kCompleting) keeps the
/// first cause that stopped it; kAllReleased then moves it to FinalState().
[[nodiscard]] std::optional<JobState> Transition(JobState state, JobEvent event);
/// The final state a stopping job reaches once released: kPending for a
/// requeue.
[[nodiscard]] JobState FinalState(EndCause cause);
/// The cause an event records when it stops a running job.
[[nodiscard]] EndCause CauseOf(JobEvent event);

[[nodiscard]] std::string_view JobStateName(JobState state);  ///< PENDING, RUNNING, …
[[nodiscard]] bool IsFinished(JobState state);  ///< COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL

/// --signal: a signal the job's ranks get once per attempt, `before` its time
/// limit, so that they can checkpoint. Sent only when the job has a time
/// limit longer than `before`.
struct TimeWarning {
  int signal = 0;  ///< 0: no warning
  std::chrono::seconds before{0};
  bool batch_only = false;  ///< --signal=B:…: only the batch script (global rank 0's process)
};
/// What a job gets when it does not say: SIGUSR1 90 s before its limit.
inline constexpr int kDefaultWarningSignal = 10;  // SIGUSR1 on Linux
inline constexpr std::chrono::seconds kDefaultWarningLead{90};
/// The longest lead a warning may have (as Slurm's sig_time).
inline constexpr std::chrono::seconds kMaxWarningLead{65535};

/// What a user asked for, as the engine needs it. The shell keeps what only
/// the launch needs (command, environment, files).
struct JobRequest {
  std::string name;
  std::string partition;  ///< empty: the default partition
  std::string account;
  std::string user_name;
  std::uint32_t uid = 0;
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::int64_t memory_mb = 0;
  std::chrono::seconds time_limit{0};  ///< 0: the partition's DefaultTime, else MaxTime
  alloc::Exclusivity exclusivity = alloc::Exclusivity::kShared;
  int switches = 0;                    ///< --switches=N; 0: no bound
  std::chrono::seconds switches_wait{0};
  bool requeue = false;
  std::vector<std::string> features;
  std::vector<std::string> nodelist;  ///< names that must be in the gang
  std::vector<std::string> exclude;   ///< names that must not be
  TimeWarning warning;                ///< default here: none (the shell applies kDefault…)
};

/// A job and everything the engine knows of it.
struct Job {
  JobId id = 0;
  JobRequest request;
  alloc::GangRequest gang;        ///< resolved against the cluster at submit
  std::chrono::seconds time_limit{0};  ///< in force
  int priority_tier = 0;
  JobState state = JobState::kPending;
  EndCause cause = EndCause::kNone;
  std::string reason;          ///< pending: Resources, Priority, …; finished: why
  std::string reason_detail;
  Millis submit_time{0};
  Millis start_time{0};
  Millis end_time{0};
  int attempt = 1;
  int exit_code = 0;
  int exit_signal = 0;
  alloc::Placement placement;  ///< grants by node rank while running or stopping
  std::vector<std::uint8_t> released;  ///< by node rank: the node confirmed its ranks are gone
  std::vector<int> exited_ok;          ///< by node rank: ranks there that exited 0
  int master_port = 0;
  int warned_attempt = 0;  ///< the attempt that got its TimeWarning; 0: none yet
};

}  // namespace cohort
