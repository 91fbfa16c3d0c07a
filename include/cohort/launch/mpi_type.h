// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

/// The MPI wire-ups a step can ask for: `srun --mpi=TYPE` and cohort.conf's
/// MpiDefault=. Pure.
namespace cohort::launch {

/// "none" (the ranks find each other themselves: mpirun, torchrun), "pmix"
/// (a PMIx server in each node's cohort-stepd; Slurm's pmix_v4 and pmix_v5
/// name the same server: OpenPMIx 4 serves clients of v3, v4 and v5) or
/// "pmi2" (a PMI server there, for MPICH). Upper or lower case. None for
/// anything else.
[[nodiscard]] std::optional<std::string_view> CanonicalMpiType(std::string_view name);

/// What `srun --mpi=list` prints and refusals name.
inline constexpr std::string_view kMpiTypes = "none, pmi2, pmix, pmix_v4, pmix_v5";

/// Whether the type's server lives in the step's stepds, whose fence tree
/// carries its fences ("pmix", "pmi2").
[[nodiscard]] inline bool MpiTypeNeedsServer(std::string_view type) {
  return type == "pmix" || type == "pmi2";
}

/// How long a fence waits for every node's ranks before it fails:
/// SLURM_PMIX_TIMEOUT's seconds, as Slurm's PMIxTimeout (1 to 86400).
inline constexpr std::chrono::seconds kDefaultFenceTimeout{300};
/// `text` as SLURM_PMIX_TIMEOUT's value: InvalidArgument saying what to give.
[[nodiscard]] absl::StatusOr<std::chrono::seconds> ParseFenceTimeout(std::string_view text);

}  // namespace cohort::launch
