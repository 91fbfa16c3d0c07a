// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "engine/pass_state.h"
#include "engine/pass_triggers.h"
#include "engine/reservations.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

class Admission;
class JobBook;
class Lifecycle;
class Preemption;
class Prioritizer;

/// Scheduling passes: which kind a moment needs (docs/scheduling.md), the
/// order pending jobs are tried in, starting them, backfill reservations for
/// those that wait, and what one pass leaves for the next so that a
/// submission or a release does not walk the whole queue.
class PassPlanner {
 public:
  /// The parts it uses, each of which outlives it.
  struct Parts {
    const config::ClusterConfig& config;
    alloc::NodePool& pool;
    alloc::GangAllocator& allocator;
    JobBook& book;
    PassTriggers& triggers;
    Prioritizer& priority;
    Lifecycle& life;
    Admission& admission;
    Preemption& preemption;
    const ReservationBook& reservations;
    const topology::Topology& topology;
  };
  explicit PassPlanner(const Parts& parts)
      : config_(parts.config),
        pool_(parts.pool),
        allocator_(parts.allocator),
        book_(parts.book),
        triggers_(parts.triggers),
        priority_(parts.priority),
        life_(parts.life),
        admission_(parts.admission),
        preemption_(parts.preemption),
        reservations_(parts.reservations),
        topology_(parts.topology) {}

  /// Priorities drift with age and usage: while jobs wait, a full pass runs
  /// at least this often (on the clock, so that no submission waits for it).
  static constexpr Millis kFullPassEvery = std::chrono::seconds(30);

  /// Tick: a full pass is due when jobs wait and the last is kFullPassEvery
  /// old (Trigger::kAging), or a WakeAt time has come.
  void Tick(Millis now);

  /// One scheduling pass of the kind that is needed.
  void Schedule(Millis now, Effects& effects);
  [[nodiscard]] std::string_view LastPassKind() const { return last_pass_kind_; }
  /// The pending jobs in the order passes try them.
  [[nodiscard]] std::vector<JobId> PendingOrder() const;

 private:
  /// Starts the job's gang on `placement`.
  void Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects);
  /// Whether the allocator's `placement` keeps every rule of the job's
  /// request (alloc::CheckPlacement); when it does not, the job waits with
  /// the broken rule as its reason, and nothing is committed.
  bool PlacementHolds(Job& job, const alloc::Placement& placement, Effects& effects);
  bool SubmissionPass(Millis now, Effects& effects, bool past_releases);
  bool ReleasePass(Millis now, Effects& effects);
  [[nodiscard]] bool ReleaseCannotMatter() const;
  void FullPass(Millis now, Effects& effects);
  void BeginPass(PassState& pass, Millis now, Effects& effects);
  void Take(const QueueKey& key, PassState& pass, Millis now, Effects& effects);
  void TakeInOrder(const QueueKey& key, PassState& pass, Millis now, Effects& effects);
  /// The nodes operators' reservations keep the job off for a start now
  /// (engine/reservations.h), appended to `out`: those of reservations it
  /// is not in that its time limit would run into, and for a job of a
  /// reservation (not FLEX) every node outside it. The first reservation
  /// to start of those that keep it off, if any.
  const AdvanceReservation* HeldOff(const Job& job, Millis now, std::vector<NodeId>& out) const;
  /// When the nodes held off are why the job cannot start: its reason and
  /// the time limit that would start it now, said in `reason`; false when
  /// it would not start without them either.
  bool ReservationIsTheReason(const Job& job, const alloc::GangRequest& without,
                              const AdvanceReservation& first, Millis now,
                              std::pair<PendingReason, std::string>& reason);

  const config::ClusterConfig& config_;
  alloc::NodePool& pool_;
  alloc::GangAllocator& allocator_;
  JobBook& book_;
  PassTriggers& triggers_;
  Prioritizer& priority_;
  Lifecycle& life_;
  Admission& admission_;
  Preemption& preemption_;
  const ReservationBook& reservations_;
  const topology::Topology& topology_;
  /// What the last full pass left for submission passes: its reservations,
  /// the first waiting job of each partition, when it ran.
  Millis last_full_pass_{0};
  std::vector<Reservation> last_reservations_;
  std::map<alloc::PartitionId, QueueKey> last_blocked_;
  std::string_view last_pass_kind_ = "none";
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
[[nodiscard]] std::optional<Reservation> PlanReservation(const alloc::NodePool& pool,
                                                         const JobBook& book,
                                                         alloc::GangAllocator& allocator,
                                                         const Job& job, PassState& pass,
                                                         Millis now);
/// The nodes other jobs' reservations hold during the job's window from
/// `start` (repeats possible).
[[nodiscard]] std::vector<NodeId> ReservedNodes(const std::vector<Reservation>& reservations,
                                                Millis start, const Job& job);

}  // namespace cohort::engine
