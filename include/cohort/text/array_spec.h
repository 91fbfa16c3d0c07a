// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// --array: sbatch's task-index specification.
namespace cohort {

/// A parsed --array: `0-999`, `1,5,9-15:2`, `0-99%8`.
struct ArraySpec {
  std::vector<int> tasks;  ///< the task ids, ascending, each once
  int max_running = 0;     ///< `%N`: at most N tasks running at once; 0: no bound
  /// SLURM_ARRAY_TASK_STEP: the step when the spec is one range `a-b:s`
  /// (1 for a plain range or a single id); 1 for a list.
  int step = 1;
};

/// Parses an --array value. Ids are 0 … max_size−1 (MaxArraySize=). Errors
/// are InvalidArgument naming the bad part and the fix ("array: \"5-2\": a
/// range must go up, as 2-5").
[[nodiscard]] absl::StatusOr<ArraySpec> ParseArraySpec(std::string_view text, int max_size);

/// The ids compressed as Slurm prints them: `0-3,5,7`, with `%N` appended
/// when max_running > 0 (`0-999%8`). Runs of consecutive ids become ranges;
/// no steps are inferred.
[[nodiscard]] std::string FormatArrayTasks(const std::vector<int>& tasks, int max_running = 0);

}  // namespace cohort
