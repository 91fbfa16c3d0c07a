// SPDX-License-Identifier: Apache-2.0
#include "plugins/score/locality.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace cohort::plugin {

void LocalityScore::Order(const ScoreContext& context, std::span<NodeId> nodes) const {
  auto key = [&](NodeId n) {
    const alloc::NodeFree& f = context.pool.Free(n);
    return std::tuple(std::popcount(f.gpus) - context.need.gpus, f.cpus - context.need.cpus, n);
  };
  std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return key(a) < key(b); });
}

}  // namespace cohort::plugin
