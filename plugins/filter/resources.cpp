// SPDX-License-Identifier: Apache-2.0
#include "plugins/filter/resources.h"

#include <bit>

namespace cohort::plugin {

void ResourcesFilter::Filter(const FilterContext& context, std::span<const NodeId> nodes,
                             std::vector<NodeId>& kept, FilterTally& tally) const {
  const alloc::NodePool& pool = context.pool;
  const NodeNeed& need = context.need;
  const bool now = context.view == View::kNow;
  const bool exclusive = need.exclusivity != alloc::Exclusivity::kShared;
  // --exclusive=topo: a job takes only groups no other job is in, and a held
  // group is closed to every other job.
  const bool topo = need.exclusivity == alloc::Exclusivity::kTopo;
  const bool held = pool.HeldGroupCount() > 0;
  // Counted in locals: the tally's ints could alias the kept nodes' and be
  // reloaded at every node of the pool.
  int excluded = 0;
  int ineligible = 0;
  int down = 0;
  int drained = 0;
  int busy = 0;
  for (const NodeId n : nodes) {
    if (context.excluded[n] != 0) {
      ++excluded;
      continue;
    }
    if (!need.Fits(pool.Capacity(n))) {
      ++ineligible;
      continue;
    }
    if (now) {
      const alloc::NodeCondition condition = pool.Condition(n);
      if (condition == alloc::NodeCondition::kDown) {
        ++down;
        continue;
      }
      if (condition == alloc::NodeCondition::kDrained) {
        ++drained;
        continue;
      }
      const alloc::NodeFree& f = pool.Free(n);
      if (exclusive ? !pool.IsIdle(n)
                    : (f.cpus < need.cpus || f.memory_mb < need.memory_mb ||
                       std::popcount(f.gpus) < need.gpus)) {
        ++busy;
        continue;
      }
      if (held || topo) {
        const topology::GroupId group = pool.GroupOf(n);
        if (group != topology::kNone &&
            (pool.GroupHeld(group) || (topo && !pool.GroupIdle(group)))) {
          ++busy;
          continue;
        }
      }
    }
    kept.push_back(n);
  }
  tally.excluded += excluded;
  tally.ineligible += ineligible;
  tally.down += down;
  tally.drained += drained;
  tally.busy += busy;
}

}  // namespace cohort::plugin
