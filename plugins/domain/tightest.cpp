// SPDX-License-Identifier: Apache-2.0
#include "plugins/domain/tightest.h"

#include "plugins/domain/walk.h"

namespace cohort::plugin {

bool TightestDomain::Choose(const DomainContext& context, std::vector<GroupId>& chosen) const {
  return ChooseLowestDomain(context, Fit::kTightest, chosen);
}

}  // namespace cohort::plugin
