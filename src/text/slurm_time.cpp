// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/slurm_time.h"

#include <array>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "cohort/diagnostics.h"

namespace cohort {
namespace {

constexpr std::string_view kForms =
    "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED";

absl::Status Invalid(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("time \"{}\": {}; {}", text, why, kForms));
}

// Splits `text` on ':' into at most three non-negative integers.
absl::StatusOr<int> SplitFields(std::string_view whole, std::string_view text,
                                std::array<std::int64_t, 3>& fields) {
  int count = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    const std::string_view part = text.substr(
        start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    if (count == 3) return Invalid(whole, "too many ':' fields");
    if (part.empty()) return Invalid(whole, "empty field");
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (error != std::errc() || end != part.data() + part.size() || value < 0) {
      return Invalid(whole, fmt::format("\"{}\" is not a non-negative number", part));
    }
    if (value > 100'000'000) return Invalid(whole, fmt::format("\"{}\" is too large", part));
    fields[static_cast<std::size_t>(count++)] = value;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return count;
}

}  // namespace

absl::StatusOr<std::chrono::seconds> ParseSlurmTime(std::string_view text) {
  if (EqualsIgnoreCase(text, "UNLIMITED") || EqualsIgnoreCase(text, "INFINITE")) return kUnlimited;
  if (text.empty()) return Invalid(text, "empty");

  std::int64_t days = 0;
  std::string_view clock = text;
  const std::size_t dash = text.find('-');
  const bool has_days = dash != std::string_view::npos;
  if (has_days) {
    const std::string_view day_text = text.substr(0, dash);
    const auto [end, error] =
        std::from_chars(day_text.data(), day_text.data() + day_text.size(), days);
    if (day_text.empty() || error != std::errc() || end != day_text.data() + day_text.size() ||
        days < 0 || days > 100'000) {
      return Invalid(text, fmt::format("\"{}\" is not a number of days", day_text));
    }
    clock = text.substr(dash + 1);
  }

  std::array<std::int64_t, 3> f{};
  const absl::StatusOr<int> count = SplitFields(text, clock, f);
  if (!count.ok()) return count.status();

  std::int64_t seconds = 0;
  if (has_days) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    seconds = days * 86400 + f[0] * 3600 + f[1] * 60 + f[2];
  } else if (*count == 1) {
    seconds = f[0] * 60;  // minutes
  } else if (*count == 2) {
    seconds = f[0] * 60 + f[1];  // MM:SS
  } else {
    seconds = f[0] * 3600 + f[1] * 60 + f[2];  // HH:MM:SS
  }
  return std::chrono::seconds(seconds);
}

std::string FormatSlurmTime(std::chrono::seconds limit) {
  if (limit == kUnlimited) return "UNLIMITED";
  const std::int64_t total = limit.count();
  const std::int64_t days = total / 86400;
  const std::int64_t hours = total % 86400 / 3600;
  const std::int64_t minutes = total % 3600 / 60;
  const std::int64_t seconds = total % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, hours, minutes, seconds);
  return fmt::format("{:02}:{:02}:{:02}", hours, minutes, seconds);
}

}  // namespace cohort
