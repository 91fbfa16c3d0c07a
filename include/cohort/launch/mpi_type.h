// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string_view>

/// The MPI wire-ups a step can ask for: `srun --mpi=TYPE` and cohort.conf's
/// MpiDefault=. Pure.
namespace cohort::launch {

/// "none" (the ranks find each other themselves: mpirun, torchrun) or "pmix"
/// (a PMIx server in each node's cohort-stepd); Slurm's pmix_v4 and pmix_v5
/// name the same server (OpenPMIx 4 serves clients of v3, v4 and v5).
/// Upper or lower case. None for anything else.
[[nodiscard]] std::optional<std::string_view> CanonicalMpiType(std::string_view name);

/// What `srun --mpi=list` prints and refusals name: "none, pmix, pmix_v4,
/// pmix_v5".
inline constexpr std::string_view kMpiTypes = "none, pmix, pmix_v4, pmix_v5";

}  // namespace cohort::launch
