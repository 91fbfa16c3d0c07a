// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/resource.h>

#include <array>
#include <string_view>

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

}  // namespace cohort::launch
