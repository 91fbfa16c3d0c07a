// SPDX-License-Identifier: Apache-2.0
#include "plugins/filter/keep_gpu_nodes.h"

namespace cohort::plugin {

void KeepGpuNodesFilter::Filter(const FilterContext& context, std::span<const NodeId> nodes,
                                std::vector<NodeId>& kept, FilterTally& tally) const {
  if (context.need.gpus > 0) {
    kept.insert(kept.end(), nodes.begin(), nodes.end());
    return;
  }
  const std::size_t before = kept.size();
  for (const NodeId n : nodes) {
    if (context.pool.Capacity(n).gpus == 0) kept.push_back(n);
  }
  tally.ruled_out += static_cast<int>(nodes.size() - (kept.size() - before));
}

}  // namespace cohort::plugin
