// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// --dependency: sbatch's job dependency specification, parsed. Evaluating
/// it against jobs is the engine's.
namespace cohort {

enum class DependencyType : std::uint8_t {
  kAfter,       ///< after:J — J has started (or ended, or was cancelled)
  kAfterOk,     ///< afterok:J — J completed successfully
  kAfterNotOk,  ///< afternotok:J — J failed, timed out, was cancelled or lost its node
  kAfterAny,    ///< afterany:J — J has ended, however
  kSingleton,  ///< singleton — no other job of this name and user is running or pending before it
};
[[nodiscard]] std::string_view DependencyTypeName(DependencyType type);  ///< "afterok", …

/// One `type:J` condition; `after:1:2` gives two.
struct DependencyTerm {
  DependencyType type = DependencyType::kAfterAny;
  std::int64_t job = 0;  ///< 0 for singleton
  int array_task = -1;  ///< `J_i`: that task of array J; -1: the whole job (every task of an array)
};

struct Dependency {
  std::vector<DependencyTerm> terms;
  bool any_of = false;  ///< `?`-separated: one satisfied term is enough; `,`: all must be
};

/// Parses a --dependency value: terms `after|afterok|afternotok|afterany:ID[:ID…]`
/// and `singleton`, joined all by `,` or all by `?` (mixing is an error). IDs
/// are `J` or `J_i`. An empty text is an empty Dependency. Errors are
/// InvalidArgument naming the bad part and the fix.
[[nodiscard]] absl::StatusOr<Dependency> ParseDependency(std::string_view text);

/// The dependency written back in --dependency's syntax.
[[nodiscard]] std::string FormatDependency(const Dependency& dependency);

}  // namespace cohort
