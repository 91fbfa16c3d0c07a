// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"

/// squeue's -S/--sort: jobs ordered by fields named with squeue's format
/// letters, each ascending or, after `-`, descending (`-S -p,i`: the
/// highest priority first, then by id).
namespace cohort::cli {

struct SortKey {
  char letter = 'i';
  bool descending = false;
};

/// The keys of a -S list: letters (i, A, F, P, t, T, p, Q, u, j, a, q, M,
/// l, D, S, V, e, N), each after an optional `+` or `-`, comma separated.
/// InvalidArgument names a letter that sorts nothing and lists those that
/// do.
[[nodiscard]] absl::StatusOr<std::vector<SortKey>> ParseSortKeys(std::string_view text);

/// Orders `jobs` by `keys`, stably: jobs equal in every key keep their
/// order. `now_ms` is when a running job's time used is counted to (M).
void SortJobs(std::vector<v1::Job>& jobs, const std::vector<SortKey>& keys, std::int64_t now_ms);

}  // namespace cohort::cli
