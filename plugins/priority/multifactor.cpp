// SPDX-License-Identifier: Apache-2.0
#include "plugins/priority/multifactor.h"

#include "cohort/policy/priority.h"

namespace cohort::plugin {

void MultifactorOrder::Rank(const QueueContext& context, std::span<Job* const> jobs) const {
  for (Job* job : jobs) {
    // Each (account, user)'s fair share once per ordering: it is the
    // costliest factor and the same for all of their jobs.
    double& share = context.shares[static_cast<std::size_t>(job->cache.share_slot)];
    if (share < 0) {
      const auto& [account, user] =
          context.share_owners[static_cast<std::size_t>(job->cache.share_slot)];
      share = context.usage.Factor(context.config, account, user, context.now);
    }
    job->cache.priority =
        policy::JobPriority(context.config, context.scale, *job, share, context.now).total;
  }
}

}  // namespace cohort::plugin
