// SPDX-License-Identifier: Apache-2.0
#include "plugins/domain/spread.h"

#include "plugins/domain/walk.h"

namespace cohort::plugin {

bool SpreadDomain::Choose(const DomainContext& context, std::vector<GroupId>& chosen) const {
  return ChooseLowestDomain(context, Fit::kRoomiest, chosen);
}

}  // namespace cohort::plugin
