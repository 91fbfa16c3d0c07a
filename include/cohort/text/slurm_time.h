// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

/// Time limits in Slurm's notation. Pure; safe from any thread.
namespace cohort {

/// The value of `UNLIMITED` (and `INFINITE`).
inline constexpr std::chrono::seconds kUnlimited = std::chrono::seconds::max();

/// Parses a time limit as sbatch's `--time` and slurm.conf's `MaxTime` do:
/// `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
/// `days-hours:minutes`, `days-hours:minutes:seconds`, or `UNLIMITED` /
/// `INFINITE` (any case), which gives kUnlimited. Returns InvalidArgument
/// with the accepted forms when the text is none of these.
[[nodiscard]] absl::StatusOr<std::chrono::seconds> ParseSlurmTime(std::string_view text);

/// Formats a time limit the way squeue shows it: `[D-]HH:MM:SS`, or
/// `UNLIMITED`.
[[nodiscard]] std::string FormatSlurmTime(std::chrono::seconds limit);

}  // namespace cohort
