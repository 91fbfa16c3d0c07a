// SPDX-License-Identifier: Apache-2.0
#include "cohort/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cohort/check.h"

namespace cohort {
namespace internal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, condition, message);
  std::abort();
}

}  // namespace internal

std::string FormatDiagnostic(const Diagnostic& diagnostic) {
  std::string out;
  const SourceLocation& at = diagnostic.where;
  if (!at.file.empty()) {
    out += at.file;
    if (at.line > 0) out += fmt::format(":{}", at.line);
    if (at.column > 0) out += fmt::format(":{}", at.column);
    out += ": ";
  }
  out += diagnostic.severity == Severity::kError ? "error: " : "warning: ";
  out += diagnostic.message;
  if (!diagnostic.hint.empty()) out += fmt::format("\n  hint: {}", diagnostic.hint);
  return out;
}

void Diagnostics::Error(SourceLocation where, std::string message, std::string hint) {
  all_.push_back({Severity::kError, std::move(where), std::move(message), std::move(hint)});
  ++error_count_;
}

void Diagnostics::Warning(SourceLocation where, std::string message, std::string hint) {
  all_.push_back({Severity::kWarning, std::move(where), std::move(message), std::move(hint)});
}

void Diagnostics::Append(const Diagnostics& other) {
  all_.insert(all_.end(), other.all_.begin(), other.all_.end());
  error_count_ += other.error_count_;
}

std::string Diagnostics::Format() const {
  std::string out;
  for (const Diagnostic& d : all_) {
    out += FormatDiagnostic(d);
    out += '\n';
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

namespace {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string NearestWord(std::string_view word, std::span<const std::string_view> known) {
  std::string_view best;
  int best_distance = 0;
  for (std::string_view candidate : known) {
    const int d = EditDistance(word, candidate);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A suggestion further away than a third of the word is noise, not a typo.
  const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  if (best.empty() || best_distance > limit) return {};
  return std::string(best);
}

}  // namespace cohort
