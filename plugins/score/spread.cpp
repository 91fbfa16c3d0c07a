// SPDX-License-Identifier: Apache-2.0
#include "plugins/score/spread.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace cohort::plugin {

void SpreadScore::Order(const ScoreContext& context, std::span<NodeId> nodes) const {
  // Negated so that ascending order puts the most free first and ties still
  // go to the lowest id.
  auto key = [&](NodeId n) {
    const alloc::NodeFree& f = context.pool.Free(n);
    return std::tuple(-f.cpus, -f.memory_mb, -std::popcount(f.gpus), n);
  };
  std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return key(a) < key(b); });
}

}  // namespace cohort::plugin
