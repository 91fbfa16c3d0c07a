// SPDX-License-Identifier: Apache-2.0
#include "plugins/priority/fifo.h"

namespace cohort::plugin {

void FifoOrder::Rank(const QueueContext& /*context*/, std::span<Job* const> jobs) const {
  for (Job* job : jobs) job->cache.priority = 0;
}

}  // namespace cohort::plugin
