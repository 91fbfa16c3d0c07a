// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cohort/diagnostics.h"

/// The `#SBATCH` and `#COHORT` directives at the top of a batch script, as
/// sbatch reads them. Pure; safe from any thread.
namespace cohort::directives {

enum class Prefix { kSbatch, kCohort };

/// One directive line: its options split into words.
struct Directive {
  int line = 0;  ///< 1-based
  Prefix prefix = Prefix::kSbatch;
  std::vector<std::string> args;  ///< e.g. {"--nodes=4", "-J", "my job"}
};

struct DirectiveResult {
  std::vector<Directive> directives;  ///< in the order of the script
  Diagnostics diagnostics;            ///< errors (unmatched quotes) and warnings
};

/// Reads the directives of `script`; `file` names it in diagnostics.
///
/// As sbatch does, a directive is a line that starts, in its first column,
/// with `#SBATCH` or `#COHORT` followed by a blank or the end of the line,
/// and only the lines before the first one that is neither blank nor a
/// comment are read (the `#!` line is a comment). The rest of the line is
/// split into words at blanks; single or double quotes group blanks into a
/// word, a backslash takes the next character literally, and a word that
/// starts with an unquoted `#` begins a comment to the end of the line (a `#`
/// inside a word, as in `-J run#2`, is kept). Lines ending in CR LF are read
/// like LF ones. Directive lines without words are skipped.
///
/// Errors: an unmatched quote (the line is skipped). Warnings, for lines
/// that look like directives but are not read: an indented one, one with
/// the prefix in another case (`#sbatch`), and any after the first command.
[[nodiscard]] DirectiveResult ParseDirectives(std::string_view script, std::string_view file);

/// "#SBATCH" or "#COHORT".
[[nodiscard]] std::string_view PrefixText(Prefix prefix);

}  // namespace cohort::directives
