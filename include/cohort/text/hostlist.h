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

/// Expands a hostlist into names, in the order written. Elements are
/// separated by ','; a ',' inside brackets separates the bracket's items. A
/// bracket holds numbers and ranges (`a[1,3,5-7]`). Several brackets in one
/// name expand to every combination, the leftmost bracket varying slowest
/// (`r[1-2]-n[1-2]` gives r1-n1 r1-n2 r2-n1 r2-n2). Each range is zero-padded
/// to the width its lower end is written with: `[01-10]` gives 01..10,
/// `[1-10]` gives 1..10, `[08-100]` gives 08..99,100. Duplicates are kept as
/// written. Whitespace around the whole hostlist is ignored.
/// Returns InvalidArgument, naming the 1-based character position of the
/// fault and how to fix it, for malformed input (`gpu[3-1]`, `gpu[1-`, `a[]`,
/// `a[x-y]`, `a[1-2`, `a]`, `a[[1]]`, `a,,b`, an empty hostlist, whitespace
/// inside, a number of more than 18 digits, a range whose ends are padded to
/// different widths such as `[001-05]`), and when the expansion would exceed
/// `max_names`: that is counted before any name is produced, so a huge
/// hostlist such as `n[1-1000000000]` fails fast without allocating.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> Expand(std::string_view hostlist,
                                                              std::size_t max_names = kMaxNames);

/// Compresses names into a short canonical hostlist: duplicates removed,
/// names in natural order (digit runs compare by value, then by written width,
/// so a1 < a01 < a2 < a10), numeric runs that share the surrounding text and
/// padding folded into brackets (`gpu[001-064]`, `a[1,3,5-7]`, a lone name
/// stays `a1`), and names that differ in more than one number folded into
/// several brackets when they form a full product (`rack[1-2]-n[01-04]`).
/// Numbers written with different padding never share a bracket (`a1,a01`).
/// Groups are listed in the natural order of their first names.
/// Expand(Compress(x)) yields the distinct names of x, each group in natural
/// order (the whole list is in natural order unless groups interleave, as in
/// `a[1,3],a2b`); Compress(Expand(h)) == h for a canonical h, that is any
/// output of Compress. Empty names are skipped. Names containing `,`, `[`,
/// `]` or whitespace cannot be written in a hostlist: they are copied through
/// unfolded and the result will not expand; validate names first. Digit runs
/// longer than 18 digits are kept as text. Runs in O(n log n).
[[nodiscard]] std::string Compress(std::span<const std::string> names);

/// A hostlist that expands to `names` in their order (distinct names
/// expected): Compress's when that keeps the order, else the names split
/// into runs that each compress in order, joined by commas
/// (`gb[019-036],gb[001-018]`). For lists where the order is meaning, such as
/// a job's nodes by node rank.
[[nodiscard]] std::string CompressInOrder(std::span<const std::string> names);

}  // namespace cohort::hostlist
