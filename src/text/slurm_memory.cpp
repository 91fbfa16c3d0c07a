// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/slurm_memory.h"

#include <cctype>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "absl/status/status.h"

namespace cohort {

absl::StatusOr<std::int64_t> ParseSlurmMemoryMb(std::string_view text) {
  auto invalid = [text] {
    return absl::InvalidArgumentError(fmt::format(
        "memory \"{}\": use megabytes (16000) or a size with a unit (16G, 16GB, 512M, 1T)", text));
  };
  if (text.empty()) return invalid();
  std::string_view digits = text;
  // As Slurm, a B may follow the unit: 16GB is 16G.
  if (digits.size() > 2 && (digits.back() == 'B' || digits.back() == 'b') &&
      std::isalpha(static_cast<unsigned char>(digits[digits.size() - 2])) != 0) {
    digits.remove_suffix(1);
  }
  std::int64_t kb_per_unit = 1024;  // megabytes
  switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
    case 'K':
      kb_per_unit = 1;
      break;
    case 'M':
      kb_per_unit = 1024;
      break;
    case 'G':
      kb_per_unit = 1024 * 1024;
      break;
    case 'T':
      kb_per_unit = 1024LL * 1024 * 1024;
      break;
    default:
      kb_per_unit = 0;
      break;
  }
  if (kb_per_unit == 0) {
    kb_per_unit = 1024;
  } else {
    digits.remove_suffix(1);
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value < 0 ||
      value > (std::int64_t{1} << 40) ||
      value > (std::numeric_limits<std::int64_t>::max() - 1023) / kb_per_unit) {
    return invalid();
  }
  return (value * kb_per_unit + 1023) / 1024;
}

}  // namespace cohort
