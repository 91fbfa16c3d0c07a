// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/mpi_type.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
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

absl::StatusOr<std::chrono::seconds> ParseFenceTimeout(std::string_view text) {
  std::int64_t seconds = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc() || end != text.data() + text.size() || seconds < 1 || seconds > 86400) {
    return absl::InvalidArgumentError(fmt::format(
        "SLURM_PMIX_TIMEOUT={:?}: give the seconds a PMIx fence waits, 1 to 86400", text));
  }
  return std::chrono::seconds(seconds);
}

}  // namespace cohort::launch
