// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// domain/tightest: the lowest switch whose subtree holds the gang, the
/// fewest groups under it, the tightest fit. A gang that fits in one group
/// takes the fullest such group; a wider one takes, after its forced groups,
/// the set whose capacities, largest first, are the smallest in
/// lexicographic order, which keeps the largest free groups whole for the
/// next wide job.
class TightestDomain final : public DomainScore {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "domain/tightest";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  [[nodiscard]] bool Choose(const DomainContext& context,
                            std::vector<GroupId>& chosen) const override;
};

}  // namespace cohort::plugin
