// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

/// Positions in configuration text and the errors and warnings found there.
namespace cohort {

/// A place in a file: 1-based line and column (0 when unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

enum class Severity { kError, kWarning };

/// One finding: where, what, and how to fix it (hint may be empty).
struct Diagnostic {
  Severity severity = Severity::kError;
  SourceLocation where;
  std::string message;
  std::string hint;
};

/// Formats `file:line:col: error: message` and, when there is a hint, a second
/// line `  hint: ...`.
[[nodiscard]] std::string FormatDiagnostic(const Diagnostic& diagnostic);

/// Collects every finding of a parse so that all of them are reported, not
/// only the first. Not thread-safe; owned by one parse.
class Diagnostics {
 public:
  void Error(SourceLocation where, std::string message, std::string hint = {});
  void Warning(SourceLocation where, std::string message, std::string hint = {});
  void Append(const Diagnostics& other);

  [[nodiscard]] bool HasErrors() const { return error_count_ > 0; }
  [[nodiscard]] int ErrorCount() const { return error_count_; }
  [[nodiscard]] const std::vector<Diagnostic>& All() const { return all_; }
  /// Every finding, one FormatDiagnostic() each, newline-terminated.
  [[nodiscard]] std::string Format() const;

 private:
  std::vector<Diagnostic> all_;
  int error_count_ = 0;
};

/// The known word closest to `word` (case-insensitive edit distance), or an
/// empty string when none is close enough to be a plausible typo.
[[nodiscard]] std::string NearestWord(std::string_view word,
                                      std::span<const std::string_view> known);

/// ASCII case-insensitive equality, as Slurm compares configuration keys.
[[nodiscard]] bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace cohort
