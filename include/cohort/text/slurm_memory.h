// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace cohort {

/// Parses a memory size as sbatch's `--mem` does: a number of megabytes, or a
/// number with a K, M, G or T suffix (any case), which a B may follow
/// (16GB, as Slurm accepts). Returns megabytes, rounded
/// up; InvalidArgument naming the accepted forms otherwise.
[[nodiscard]] absl::StatusOr<std::int64_t> ParseSlurmMemoryMb(std::string_view text);

}  // namespace cohort
