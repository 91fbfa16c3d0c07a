// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/diagnostics.h"

/// The shared lexical layer of cohort.conf and topology.conf: `Key=Value`
/// words, `#` comments, `\` line continuation, double-quoted values.
namespace cohort::conf {

struct Word {
  std::string key;
  std::string value;
  SourceLocation key_at;
  SourceLocation value_at;
};

/// One logical line: its words in order. The first word says what the line
/// defines (`NodeName=`, `SwitchName=`, or a single global key).
struct Line {
  std::vector<Word> words;
};

/// Splits `text` into logical lines. Words without `=` and unterminated quotes
/// are reported to `diagnostics` and skipped; the rest of the file is still
/// read, so every error is reported in one go.
[[nodiscard]] std::vector<Line> Lex(std::string_view text, std::string_view file,
                                    Diagnostics& diagnostics);

/// Reports `word` as an unknown key, suggesting the nearest of `known`.
void ReportUnknownKey(const Word& word, std::string_view context,
                      std::span<const std::string_view> known, Diagnostics& diagnostics);

/// Parses a positive (or, with kAllowZero, non-negative) integer value,
/// reporting a located error and returning false when it is not one.
enum class ZeroPolicy { kAllowZero, kPositiveOnly };
[[nodiscard]] bool ParseInt(const Word& word, ZeroPolicy zero, long long& out,
                            Diagnostics& diagnostics);

/// Parses YES/NO (and TRUE/FALSE, 1/0), reporting a located error otherwise.
[[nodiscard]] bool ParseYesNo(const Word& word, bool& out, Diagnostics& diagnostics);

/// Splits a comma list, dropping empty items.
[[nodiscard]] std::vector<std::string> SplitCommas(std::string_view text);

/// Expands a hostlist value, reporting a located error (the column of the
/// faulty character) and returning false on a malformed one.
[[nodiscard]] bool ExpandHostlistValue(const Word& word, std::vector<std::string>& out,
                                       Diagnostics& diagnostics);

}  // namespace cohort::conf
