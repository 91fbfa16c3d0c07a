// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/reservation_timeline.h"
#include "cohort/engine/job.h"
#include "cohort/plugin.h"
#include "engine/engine_support.h"
#include "engine/quotas.h"

namespace cohort::engine {

/// Nodes promised to a waiting job from `start` (a backfill reservation, or
/// a preemptor's victims' nodes from now).
struct Reservation {
  JobId job = 0;
  Millis start{0};
  std::vector<NodeId> nodes;
};

/// A pending job's place in the order passes try them: highest partition
/// tier first, then highest priority, then oldest id. Sorted by value, so
/// that sorting a long queue does not chase a pointer per comparison.
struct QueueKey {
  int tier = 0;
  alloc::PartitionId partition = -1;  ///< -1: none; not part of the order
  std::int64_t priority = 0;
  JobId id = 0;
  Job* job = nullptr;
  static QueueKey Of(Job& job) {
    return {job.priority_tier, job.gang.partition.value_or(-1), job.cache.priority, job.id, &job};
  }
  bool operator<(const QueueKey& o) const {
    if (tier != o.tier) return tier > o.tier;
    if (priority != o.priority) return priority > o.priority;
    return id < o.id;
  }
};

/// The running totals a pass keeps for admission: the QOS totals the
/// chosen admission checks read, and each array's running tasks.
struct PassCounts {
  /// Some chosen admission check may make jobs wait (Admission::ChecksMayWait);
  /// without one `running` stays empty.
  bool checks_may_wait = false;
  plugin::RunningTotals running;
  std::map<JobId, int> array_running;
  /// The account tree's limits, when some account has one; else null.
  const Quotas* quotas = nullptr;
  QuotaTotals quota;
  Millis now{0};

  /// A job starts (+1) or is counted as running at the start of the pass.
  void Count(const Job& job, int sign) {
    if (job.array.job_id != 0 && job.array.task_id >= 0) array_running[job.array.job_id] += sign;
    if (checks_may_wait) running.Count(job, sign);
    if (quotas != nullptr) quotas->Count(quota, job, sign, now);
  }
};

/// What one pass has learned so far: running totals for limits and array
/// throttles, the reservations made, partitions whose top job waits.
struct PassState {
  Millis now{0};
  PassCounts counts;
  std::vector<Reservation> reservations;
  std::set<JobId> preemptors;  ///< jobs whose victims are still stopping
  std::set<alloc::PartitionId> blocked;
  int backfill_tried = 0;
  /// The keys not taken yet, by partition, and how many of them lie in
  /// partitions not blocked yet: none, and the depth spent, settles the pass.
  std::map<alloc::PartitionId, std::size_t> left;
  std::size_t open = 0;
  /// The pool as it is now, copied once per pass for reservation planning
  /// (which releases running jobs into it and takes them back after), and
  /// when each node could take each shape of gang as running jobs end.
  std::optional<alloc::NodePool> shadow;
  std::optional<ReservationTimeline> timeline;
  /// Nodes of the live pool that may fit one node of a gang, by shape: a
  /// superset of where it can go now, so that a backfill candidate is
  /// skipped, or placed among these few nodes, without a pass over the whole
  /// pool. Cleared when the pool changes.
  std::map<GangShape, std::vector<NodeId>> may_fit;
  /// Per node, the earliest start of the reservations holding it
  /// (Millis::max(): none). A job is planned at most once per pass, so none
  /// of them is its own.
  std::vector<Millis> reserved_from;

  void CountKeys(const std::vector<QueueKey>& keys) {
    for (const QueueKey& key : keys) ++left[key.partition];
    open = keys.size();
  }

  void Reserve(Reservation r) {
    for (const NodeId n : r.nodes) {
      Millis& from = reserved_from[static_cast<std::size_t>(n)];
      from = std::min(from, r.start);
    }
    reservations.push_back(std::move(r));
  }

  const std::vector<NodeId>& MayFitNodes(const alloc::GangRequest& gang,
                                         const alloc::NodePool& pool) {
    auto [it, fresh] = may_fit.try_emplace(ShapeOf(gang));
    if (fresh) it->second = NodesThatMayFit(gang, pool);
    return it->second;
  }
};

}  // namespace cohort::engine
