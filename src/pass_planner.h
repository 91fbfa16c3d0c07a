// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "cohort/job.h"
#include "pass_state.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

struct EngineCore;

/// Scheduling passes: which kind a moment needs (docs/scheduling.md), the
/// order pending jobs are tried in, starting them, backfill reservations for
/// those that wait, and what one pass leaves for the next so that a
/// submission or a release does not walk the whole queue.
class PassPlanner {
 public:
  explicit PassPlanner(EngineCore& core) : core_(core) {}

  /// Priorities drift with age and usage: while jobs wait, a full pass runs
  /// at least this often (on the clock, so that no submission waits for it).
  static constexpr Millis kFullPassEvery = std::chrono::seconds(30);

  /// Something other than a submission or a release happened: the next pass
  /// goes over the whole queue.
  void NeedPass();
  /// `job` was submitted: a submission pass may place it.
  void Submitted(const Job& job);
  /// `job` gave back `node`: what waits may fit now.
  void Released(const Job& job, NodeId node);
  /// Whether the start or end of `job` may let a waiting job's dependency
  /// hold (those jobs may lie where a release pass does not look).
  [[nodiscard]] bool IsDependencyTarget(const Job& job) const;
  /// A pending job may be tried from `at` on (its --begin): a full pass is
  /// due then.
  void WakeAt(Millis at) { wake_at_ = std::min(wake_at_, at); }
  /// Tick: a full pass is due when jobs wait and the last is kFullPassEvery
  /// old, or a WakeAt time has come.
  void Tick(Millis now);

  /// One scheduling pass of the kind that is needed.
  void Schedule(Millis now, Effects& effects);
  [[nodiscard]] bool ScheduleNeeded() const { return schedule_needed_; }
  [[nodiscard]] std::string_view LastPassKind() const { return last_pass_kind_; }
  /// The pending jobs in the order passes try them.
  [[nodiscard]] std::vector<JobId> PendingOrder() const;

 private:
  void NoteDependencies(const Job& job);
  bool SubmissionPass(Millis now, Effects& effects, bool past_releases);
  bool ReleasePass(Millis now, Effects& effects);
  [[nodiscard]] bool ReleaseCannotMatter() const;
  void ForgetReleases();
  void FullPass(Millis now, Effects& effects);
  void BeginPass(PassState& pass, Millis now, Effects& effects);
  void Take(const QueueKey& key, PassState& pass, Millis now, Effects& effects);
  void TakeInOrder(const QueueKey& key, PassState& pass, Millis now, Effects& effects);

  EngineCore& core_;
  bool schedule_needed_ = false;
  Millis wake_at_ = Millis::max();
  /// What the last full pass left for submission passes: its reservations,
  /// the first waiting job of each partition, when it ran; and the jobs
  /// submitted since.
  bool full_pass_needed_ = true;
  Millis last_full_pass_{0};
  std::vector<Reservation> last_reservations_;
  std::map<alloc::PartitionId, QueueKey> last_blocked_;
  std::vector<JobId> submitted_;
  bool released_ = false;  ///< a node was given back since the last pass
  /// The nodes given back since the last pass: a release that frees nothing
  /// one node of any waiting shape could take needs no pass.
  std::vector<NodeId> released_nodes_;
  /// An array task gave back a node: a throttled array (%N) may start its
  /// next task anywhere, not only where this one ran.
  bool released_array_task_ = false;
  std::string_view last_pass_kind_ = "none";
  /// The jobs that pending jobs' dependencies name, and whether one waits
  /// as a singleton. Each full pass rebuilds them; submissions add to them.
  std::set<JobId> dependency_targets_;
  bool singleton_waits_ = false;
  /// The queue as the last passes ordered it (keys without job pointers),
  /// whether that covers every pending job, and the partitions of those it
  /// does not cover.
  std::vector<QueueKey> last_order_;
  bool last_order_complete_ = false;
  std::set<alloc::PartitionId> last_unordered_;
};

/// Backfill: the earliest time the job's gang fits outside the pass's
/// reservations as running jobs end at their limits, and where; none when
/// no limit ever frees enough.
[[nodiscard]] std::optional<Reservation> PlanReservation(EngineCore& core, const Job& job,
                                                         PassState& pass, Millis now);
/// The nodes other jobs' reservations hold during the job's window from
/// `start` (repeats possible).
[[nodiscard]] std::vector<NodeId> ReservedNodes(const std::vector<Reservation>& reservations,
                                                Millis start, const Job& job);

}  // namespace cohort::engine
