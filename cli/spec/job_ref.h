// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// Job references as users write them: `12` (a job, or every task of array
/// 12) and `12_3` (task 3 of array 12), as Slurm's commands take them.
namespace cohort::cli {

/// One job reference.
struct JobRef {
  std::int64_t job = 0;  ///< the job's (or the array's) id, at least 1
  int task = -1;         ///< the array task; -1: the whole job
  friend bool operator==(const JobRef&, const JobRef&) = default;
};

/// Reads `J` or `J_i`: J a positive job id, i a task index of 0 or more,
/// both plain decimal numbers. InvalidArgument, naming `verb` (the command,
/// such as "cancel") and the accepted forms, for anything else: `12_`, `x`,
/// `-3`, `0`, `12_x`.
[[nodiscard]] absl::StatusOr<JobRef> ParseJobRef(std::string_view text, std::string_view verb);

/// Reads every word with ParseJobRef; the first bad one is the error.
/// InvalidArgument too when `words` is empty.
[[nodiscard]] absl::StatusOr<std::vector<JobRef>> ParseJobRefs(
    const std::vector<std::string>& words, std::string_view verb);

/// The reference as the controller takes it: `12` or `12_3`.
[[nodiscard]] std::string FormatJobRef(const JobRef& ref);

/// The job a command run inside a job acts on: $COHORT_JOB_ID, else
/// $SLURM_JOB_ID (pass each variable's value, empty when unset).
/// InvalidArgument naming `verb` when neither is set (saying to give the
/// job, or to run the command inside one) or the one set is not a job
/// reference (naming the variable).
[[nodiscard]] absl::StatusOr<JobRef> JobRefFromEnvironment(std::string_view cohort_job_id,
                                                           std::string_view slurm_job_id,
                                                           std::string_view verb);

}  // namespace cohort::cli
