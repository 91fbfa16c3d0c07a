// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/engine/job.h"

namespace cohort::engine {

using alloc::NodeId;

/// What may let a waiting job start, as the parts of the engine see it
/// happen. Each is counted (the controller's
/// `cohort_scheduler_pass_triggers_total`).
enum class Trigger : std::uint8_t {
  kSubmitted,       ///< a job was queued
  kReleased,        ///< a job gave back a node
  kDependency,      ///< a job others' dependencies name started or gave back a node
  kEndedPending,    ///< a pending job ended (cancelled, or no longer admitted)
  kRequeued,        ///< a job went back to the queue
  kUpdated,         ///< pending jobs were changed (priority, limits, …)
  kHeld,            ///< pending jobs were held: what they were to take is free
  kUnheld,          ///< held jobs were released
  kNodeUp,          ///< a node registered
  kNodeResumed,     ///< a drained node was resumed
  kPartitionUp,     ///< an operator let a partition start jobs again
  kAccounts,        ///< sacctmgr changed the accounts: limits, shares, members
  kReservations,    ///< a reservation was made, changed, deleted, began or ended
  kSuspended,       ///< a preemption victim was suspended: its nodes are free
  kSwitchWaitOver,  ///< a job's --switches wait ran out: it takes any leaves now
  kBeginTime,       ///< a job's --begin time came
  kAging,           ///< priorities drifted with age and usage (every 30 s)
  kRestored,        ///< the engine's state was restored
};
inline constexpr std::size_t kTriggerCount = static_cast<std::size_t>(Trigger::kRestored) + 1;

/// The trigger's name in metrics (`node_up`).
[[nodiscard]] std::string_view TriggerName(Trigger trigger);

/// The triggers noted since the last scheduling pass, and the kind of pass
/// they call for, decided here alone: a submission needs a submission pass
/// at least, a release a release pass, anything else a full pass. Parts
/// below the planner note triggers here and never reach the planner itself.
///
/// Also what makes a release or a start matter beyond its nodes: the jobs
/// that pending jobs' dependencies name (rebuilt by each full pass).
class PassTriggers {
 public:
  /// Something happened that only a full pass weighs.
  void Note(Trigger trigger);
  /// `job` was queued.
  void Submitted(const Job& job);
  /// `job` gave back `node`.
  void Released(const Job& job, NodeId node);
  /// `job` started: a dependency trigger when others wait for it (after:).
  void Started(const Job& job);
  /// A pending job may be tried from `at` on: a full pass is due then.
  void WakeAt(Millis at);
  /// Notes kBeginTime when a WakeAt time has come.
  void Tick(Millis now);

  /// Notes what `job`'s dependencies name (a full pass calls this for each
  /// pending job after ForgetDependencies(); a submission, Submitted).
  void NoteDependencies(const Job& job);
  /// Whether the start or end of `job` may let a waiting job's dependency
  /// hold.
  [[nodiscard]] bool IsDependencyTarget(const Job& job) const;

  /// Some pass is needed.
  [[nodiscard]] bool PassNeeded() const { return pass_needed_; }
  /// Only a full pass weighs what happened.
  [[nodiscard]] bool FullPassNeeded() const { return full_pass_needed_; }
  /// A node was given back (by a job no dependency names).
  [[nodiscard]] bool AnyReleased() const { return released_; }
  [[nodiscard]] const std::vector<NodeId>& ReleasedNodes() const { return released_nodes_; }
  /// An array task gave back a node: a throttled array (%N) may start its
  /// next task anywhere, not only where this one ran.
  [[nodiscard]] bool ReleasedArrayTask() const { return released_array_task_; }
  [[nodiscard]] const std::vector<JobId>& SubmittedJobs() const { return submitted_; }

  /// A pass begins: it takes in the submissions and releases noted.
  void PassBegun();
  /// A full pass begins: it weighs everything noted so far.
  void FullPassBegun() { full_pass_needed_ = false; }
  /// The dependency targets are forgotten, for a full pass to note again.
  void ForgetDependencies();
  /// No pass was needed after all: the releases could not matter.
  void NothingToDo();

  /// How often each trigger was noted since the start.
  [[nodiscard]] const std::array<std::uint64_t, kTriggerCount>& Counts() const { return counts_; }

 private:
  void ForgetReleases();

  bool pass_needed_ = false;
  bool full_pass_needed_ = true;
  Millis wake_at_ = Millis::max();
  std::vector<JobId> submitted_;
  bool released_ = false;
  std::vector<NodeId> released_nodes_;
  bool released_array_task_ = false;
  std::set<JobId> dependency_targets_;
  bool singleton_waits_ = false;
  std::array<std::uint64_t, kTriggerCount> counts_{};
};

}  // namespace cohort::engine
