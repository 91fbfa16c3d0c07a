// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// domain/spread: still the lowest switch and the fewest groups, but worst
/// fit among them: a gang that fits in one group takes the emptiest such
/// group, a wider one the roomiest switch and its largest groups. Small jobs
/// then spread over the leaf switches, so their storage and checkpoint
/// traffic shares fewer uplinks; the price is fewer empty leaves for the
/// next wide job.
class SpreadDomain final : public DomainScore {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "domain/spread";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  [[nodiscard]] bool Choose(const DomainContext& context,
                            std::vector<GroupId>& chosen) const override;
};

}  // namespace cohort::plugin
