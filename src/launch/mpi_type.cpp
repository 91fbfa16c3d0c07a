// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/mpi_type.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace cohort::launch {

std::optional<std::string_view> CanonicalMpiType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "none") return "none";
  if (lower == "pmix" || lower == "pmix_v4" || lower == "pmix_v5") return "pmix";
  if (lower == "pmi2") return "pmi2";
  return std::nullopt;
}

}  // namespace cohort::launch
