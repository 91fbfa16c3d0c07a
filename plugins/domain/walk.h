// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/plugin.h"

namespace cohort::plugin {

/// Which of two equally low domains with equally few groups wins.
enum class Fit : std::uint8_t {
  kTightest,  ///< the smallest capacity that holds the gang (best fit)
  kRoomiest,  ///< the largest capacity (worst fit)
};

/// The domain walk the domain scores share, DomainScore::Choose's contract.
/// A gang that fits in one group (and pins at most that group) gets one
/// group, the one `fit` prefers. Otherwise the lowest level with a switch
/// that holds it; there the fewest groups (the forced ones, then the largest
/// others), then the capacity `fit` prefers, then the lowest id. In that
/// switch, after the forced groups: with kTightest the set whose
/// capacities, largest first, are the smallest in lexicographic order (it
/// keeps the largest free groups whole), with kRoomiest the largest groups.
/// Honours --switches=N where groups are leaves.
[[nodiscard]] bool ChooseLowestDomain(const DomainContext& context, Fit fit,
                                      std::vector<GroupId>& chosen);

}  // namespace cohort::plugin
