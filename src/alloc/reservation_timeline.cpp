// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/reservation_timeline.h"

#include <algorithm>
#include <bit>

namespace cohort {

bool MayFitOneNode(const alloc::GangRequest& gang, const alloc::NodeCapacity& capacity,
                   const alloc::NodeFree& free) {
  if (gang.exclusivity != alloc::Exclusivity::kShared) {
    return free.cpus == capacity.cpus && free.memory_mb == capacity.memory_mb &&
           free.gpus == alloc::AllGpus(capacity.gpus);
  }
  return free.cpus >= alloc::CpusPerNode(gang) && free.memory_mb >= gang.memory_mb_per_node &&
         std::popcount(free.gpus) >= gang.gpus_per_node;
}

GangShape ShapeOf(const alloc::GangRequest& gang) {
  // --exclusive=topo asks of each node what --exclusive does: the shadow
  // pool's placement checks the groups.
  return {gang.partition.value_or(-1), gang.exclusivity != alloc::Exclusivity::kShared,
          alloc::CpusPerNode(gang), gang.memory_mb_per_node, gang.gpus_per_node};
}

bool MayFitOneNode(const GangShape& shape, const alloc::NodeCapacity& capacity,
                   const alloc::NodeFree& free) {
  const auto& [partition, exclusive, cpus, memory_mb, gpus] = shape;
  alloc::GangRequest gang;
  gang.exclusivity = exclusive ? alloc::Exclusivity::kExclusive : alloc::Exclusivity::kShared;
  gang.tasks_per_node = 1;
  gang.cpus_per_task = cpus;
  gang.memory_mb_per_node = memory_mb;
  gang.gpus_per_node = gpus;
  return MayFitOneNode(gang, capacity, free);
}

ReservationTimeline::ReservationTimeline(const alloc::NodePool& pool, std::vector<Release> releases)
    : pool_(pool),
      offsets_(static_cast<std::size_t>(pool.NodeCount()) + 1, 0),
      advanced_(static_cast<std::size_t>(pool.NodeCount()), 0) {
  // By node (a counting sort), then by end within each node's few.
  for (const Release& r : releases) {
    ++offsets_[static_cast<std::size_t>(r.grant.node) + 1];
    first_end_ = std::min(first_end_, r.end);
  }
  for (std::size_t n = 1; n < offsets_.size(); ++n) offsets_[n] += offsets_[n - 1];
  releases_.resize(releases.size());
  std::vector<std::uint32_t> next(offsets_.begin(), offsets_.end() - 1);
  for (const Release& r : releases) releases_[next[static_cast<std::size_t>(r.grant.node)]++] = r;
  for (std::size_t n = 0; n + 1 < offsets_.size(); ++n) {
    std::sort(releases_.begin() + offsets_[n], releases_.begin() + offsets_[n + 1],
              [](const Release& a, const Release& b) { return a.end < b.end; });
  }
}

std::span<const ReservationTimeline::Release> ReservationTimeline::ReleasesOf(NodeId node) const {
  const auto n = static_cast<std::size_t>(node);
  return {releases_.data() + offsets_[n], releases_.data() + offsets_[n + 1]};
}

ReservationTimeline::Millis ReservationTimeline::ComputeFitTime(const alloc::GangRequest& gang,
                                                                NodeId node) const {
  if (pool_.Condition(node) != alloc::NodeCondition::kUp) return Millis::max();
  const alloc::NodeCapacity& capacity = pool_.Capacity(node);
  alloc::NodeFree free = pool_.Free(node);
  if (MayFitOneNode(gang, capacity, free)) return first_end_;
  for (const Release& r : ReleasesOf(node)) {
    free.cpus += r.grant.cpus;
    free.memory_mb += r.grant.memory_mb;
    free.gpus |= r.grant.gpus;
    if (MayFitOneNode(gang, capacity, free)) return r.end;
  }
  return Millis::max();
}

const ReservationTimeline::Fits& ReservationTimeline::FitTimes(const alloc::GangRequest& gang) {
  auto [it, fresh] = shapes_.try_emplace(ShapeOf(gang));
  Shape& shape = it->second;
  if (!fresh) return shape.fits;
  shape.gang.tasks_per_node = 1;
  shape.gang.cpus_per_task = alloc::CpusPerNode(gang);
  shape.gang.memory_mb_per_node = gang.memory_mb_per_node;
  shape.gang.gpus_per_node = gang.gpus_per_node;
  shape.gang.exclusivity = gang.exclusivity;
  shape.gang.partition = gang.partition;
  Fits& fits = shape.fits;
  fits.time.assign(static_cast<std::size_t>(pool_.NodeCount()), Millis::max());
  if (first_end_ == Millis::max()) return fits;  // nothing ends: nothing to plan
  const auto add = [&](NodeId n) {
    const Millis t = ComputeFitTime(shape.gang, n);
    fits.time[static_cast<std::size_t>(n)] = t;
    if (t != Millis::max()) fits.order.emplace_back(t, n);
  };
  if (gang.partition) {
    for (const NodeId n : pool_.GetPartition(*gang.partition).nodes) add(n);
  } else {
    for (NodeId n = 0; n < pool_.NodeCount(); ++n) add(n);
  }
  std::sort(fits.order.begin(), fits.order.end());
  return fits;
}

void ReservationTimeline::NodeChanged(NodeId node) {
  if (first_end_ == Millis::max()) return;  // no shape lists a node
  for (auto& [key, shape] : shapes_) {
    Fits& fits = shape.fits;
    Millis& time = fits.time[static_cast<std::size_t>(node)];
    const bool member =
        !shape.gang.partition || pool_.GetPartition(*shape.gang.partition).contains[node] != 0;
    if (!member) continue;
    const Millis now = ComputeFitTime(shape.gang, node);
    if (now == time) continue;
    if (time != Millis::max()) {
      fits.order.erase(
          std::lower_bound(fits.order.begin(), fits.order.end(), std::pair{time, node}));
    }
    time = now;
    if (now != Millis::max()) {
      const std::pair entry{now, node};
      fits.order.insert(std::lower_bound(fits.order.begin(), fits.order.end(), entry), entry);
    }
  }
}

void ReservationTimeline::Advance(std::span<const NodeId> nodes, Millis t,
                                  alloc::NodePool& shadow) {
  for (const NodeId node : nodes) {
    const std::span<const Release> releases = ReleasesOf(node);
    std::uint32_t& done = advanced_[static_cast<std::size_t>(node)];
    if (done == releases.size() || releases[done].end > t) continue;
    if (done == 0) advanced_nodes_.push_back(node);
    for (; done < releases.size() && releases[done].end <= t; ++done) {
      shadow.Release({&releases[done].grant, 1});
    }
  }
}

void ReservationTimeline::Rewind(alloc::NodePool& shadow) {
  for (const NodeId node : advanced_nodes_) {
    std::uint32_t& done = advanced_[static_cast<std::size_t>(node)];
    const std::span<const Release> releases = ReleasesOf(node);
    for (std::uint32_t i = 0; i < done; ++i) shadow.Commit({&releases[i].grant, 1});
    done = 0;
  }
  advanced_nodes_.clear();
}

}  // namespace cohort
