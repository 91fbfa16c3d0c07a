// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "cohort/diagnostics.h"

/// The submitter's resource limits (`ulimit`), carried to the ranks as
/// Slurm's sbatch and srun carry them (PropagateResourceLimits=ALL): the
/// command puts each soft limit in the job's environment as
/// SLURM_RLIMIT_<NAME>=N (RLIM_INFINITY's number for unlimited), and each
/// rank starts with them, up to its node's hard limits.
namespace cohort::launch {

inline constexpr std::string_view kRlimitPrefix = "SLURM_RLIMIT_";

struct ResourceLimit {
  std::string_view name;  ///< after kRlimitPrefix: CPU, NOFILE, …
  decltype(RLIMIT_CPU) resource;
};

/// Slurm's list, in its order.
inline constexpr std::array<ResourceLimit, 10> kResourceLimits{{
    {"CPU", RLIMIT_CPU},
    {"FSIZE", RLIMIT_FSIZE},
    {"DATA", RLIMIT_DATA},
    {"STACK", RLIMIT_STACK},
    {"CORE", RLIMIT_CORE},
    {"RSS", RLIMIT_RSS},
    {"NPROC", RLIMIT_NPROC},
    {"NOFILE", RLIMIT_NOFILE},
    {"MEMLOCK", RLIMIT_MEMLOCK},
    {"AS", RLIMIT_AS},
}};

/// Whether the limit `name` is one --propagate=`list` passes on: ALL (or
/// an empty list) passes every one, NONE none, else the names listed
/// (any case, comma separated).
[[nodiscard]] inline bool Propagates(std::string_view list, std::string_view name) {
  if (list.empty() || EqualsIgnoreCase(list, "ALL")) return true;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    if (EqualsIgnoreCase(list.substr(start, comma - start), name)) return true;
    start = comma + 1;
  }
  return false;
}

/// InvalidArgument naming a word of --propagate=`list` that is no limit.
[[nodiscard]] inline absl::Status CheckPropagate(std::string_view list) {
  if (EqualsIgnoreCase(list, "ALL") || EqualsIgnoreCase(list, "NONE")) return absl::OkStatus();
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view word = list.substr(start, comma - start);
    start = comma + 1;
    if (std::ranges::any_of(kResourceLimits, [&](const ResourceLimit& l) {
          return EqualsIgnoreCase(l.name, word);
        })) {
      continue;
    }
    return absl::InvalidArgumentError(fmt::format(
        "--propagate: \"{}\" is no limit; give ALL, NONE, or some of AS, CORE, CPU, DATA, FSIZE, "
        "MEMLOCK, NOFILE, NPROC, RSS, STACK",
        word));
  }
  return absl::OkStatus();
}

}  // namespace cohort::launch
