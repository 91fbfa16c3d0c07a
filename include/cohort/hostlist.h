// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// Hostlists in Slurm's syntax: `gpu[001-064]`, `rack[1-2]-n[01-04]`,
/// `a[1,3,5-7]`, `a1,b[2-3]`. Pure functions; safe from any thread.
namespace cohort::hostlist {

/// Expansions larger than this are refused rather than attempted.
inline constexpr std::size_t kMaxNames = 1'000'000;

/// Expands a hostlist into names, in the order written. Several brackets in
/// one name expand to every combination, the leftmost bracket varying
/// slowest (`r[1-2]-n[1-2]` gives r1-n1 r1-n2 r2-n1 r2-n2). Zero padding is
/// kept (`[01-10]` pads to two digits). Duplicates are kept as written.
/// Returns InvalidArgument naming the 1-based character position of the fault
/// (`gpu[3-1]`, `gpu[1-`, `a[]`, `a[x-y]`, `a,,b`), or when the expansion
/// would exceed `max_names`.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> Expand(std::string_view hostlist,
                                                               std::size_t max_names = kMaxNames);

/// Compresses names into the shortest canonical hostlist: duplicates removed,
/// names in natural order (text, then number by value), numeric runs that
/// share a prefix, suffix and padding folded into brackets, and names that
/// differ in more than one number folded into several brackets when they
/// form a full product (`rack[1-2]-n[01-04]`). Expand(Compress(x)) yields the
/// sorted, deduplicated x, and Compress(Expand(h)) == h for a canonical h.
[[nodiscard]] std::string Compress(std::span<const std::string> names);

}  // namespace cohort::hostlist
