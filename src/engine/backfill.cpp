// SPDX-License-Identifier: Apache-2.0
// Backfill reservations: when and where a waiting job's gang first fits as
// running jobs end at their limits, outside the reservations of the jobs
// ahead of it.
#include <algorithm>
#include <functional>
#include <queue>

#include "engine/job_book.h"
#include "engine/pass_planner.h"

namespace cohort::engine {

std::vector<NodeId> ReservedNodes(const std::vector<Reservation>& reservations, Millis start,
                                  const Job& job) {
  std::vector<NodeId> nodes;
  const Millis end =
      job.time_limit == kUnlimited ? Millis::max() : start + ToMillis(job.time_limit);
  // Repeats are harmless: the allocator marks excluded nodes in a mask.
  for (const Reservation& r : reservations) {
    if (r.job != job.id && r.start < end) nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
  }
  return nodes;
}

std::optional<Reservation> PlanReservation(const alloc::NodePool& pool, const JobBook& book,
                                           alloc::GangAllocator& allocator, const Job& job,
                                           PassState& pass, Millis now) {
  if (!pass.shadow) pass.shadow = pool;
  if (!pass.timeline) {
    std::vector<ReservationTimeline::Release> releases;
    for (const Job* other : book.Active()) {
      const Millis end = EndBound(*other, now);
      if (end == Millis::max()) continue;
      ForEachHeldGrant(*other, [&](const alloc::NodeGrant& g) { releases.push_back({end, g}); });
      for (const alloc::NodeGrant& g : other->run.spares) releases.push_back({end, g});
    }
    pass.timeline.emplace(pool, std::move(releases));
  }
  alloc::NodePool& shadow = *pass.shadow;
  ReservationTimeline& timeline = *pass.timeline;
  // Nodes join the count at the time they could first take one node of the
  // gang, unless a reservation holds them before the job's window from then
  // would end; as that window moves later, reservations take counted nodes
  // out of the count, soonest first.
  const ReservationTimeline::Fits& fits = timeline.FitTimes(job.gang);
  const std::vector<Millis>& reserved_from = pass.reserved_from;
  const auto window_end = [&](Millis t) {
    return job.time_limit == kUnlimited ? Millis::max() : t + ToMillis(job.time_limit);
  };
  using Held = std::pair<Millis, NodeId>;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held;  // counted, reserved later
  int count = 0;
  std::size_t next = 0;
  std::optional<Reservation> found;
  std::vector<NodeId> among;
  while (next < fits.order.size() && !found) {
    const Millis t = fits.order[next].first;
    const Millis end = window_end(t);
    for (; next < fits.order.size() && fits.order[next].first == t; ++next) {
      const NodeId n = fits.order[next].second;
      const Millis reserved = reserved_from[static_cast<std::size_t>(n)];
      if (reserved < end) continue;
      ++count;
      if (reserved != Millis::max()) held.emplace(reserved, n);
    }
    for (; !held.empty() && held.top().first < end; held.pop()) --count;
    // Place only when enough nodes may fit outside the reservations: a
    // placement then fails only for the shape of the tree (--switches,
    // segments), so most reservations cost one placement, on the shadow
    // pool as it will be at t on the nodes that count.
    if (count < job.gang.nodes) continue;
    among.clear();
    for (std::size_t i = 0; i < next; ++i) {
      const NodeId n = fits.order[i].second;
      if (reserved_from[static_cast<std::size_t>(n)] >= end) among.push_back(n);
    }
    timeline.Advance(among, t, shadow);
    const alloc::PlacementResult result =
        allocator.Place(job.gang, shadow, alloc::GangAllocator::Classify::kNo, &among);
    if (result.outcome == alloc::Outcome::kPlaced) {
      found = Reservation{job.id, t, {}};
      for (const alloc::NodeGrant& g : result.placement.grants) found->nodes.push_back(g.node);
      std::sort(found->nodes.begin(), found->nodes.end());
    }
  }
  // Back to now for the next job.
  timeline.Rewind(shadow);
  return found;
}

// ------------------------------------------------------------- preemption

}  // namespace cohort::engine
