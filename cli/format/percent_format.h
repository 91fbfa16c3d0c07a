// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cctype>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "absl/status/statusor.h"

/// squeue's and sinfo's -o formats: literal text and `%[.][WIDTH]X` fields,
/// where X is a letter of the command's field table, `.` right-aligns and
/// WIDTH pads and cuts. `Field` has `char letter` and `std::string_view
/// meaning`.
namespace cohort::cli {

template <typename Field>
struct FormatSegment {
  std::string literal;
  const Field* field = nullptr;  ///< null: `literal`
  bool right = false;
  std::size_t width = 0;  ///< 0: as wide as the text
};

/// Reads a format; InvalidArgument names an unknown field, its position and
/// every field `fields` has.
template <typename Field>
absl::StatusOr<std::vector<FormatSegment<Field>>> ParsePercentFormat(
    std::string_view format, std::span<const Field> fields) {
  std::vector<FormatSegment<Field>> segments;
  std::string literal;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      literal += format[i];
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      literal += '%';
      ++i;
      continue;
    }
    FormatSegment<Field> s;
    std::size_t j = i + 1;
    if (j < format.size() && format[j] == '.') {
      s.right = true;
      ++j;
    }
    while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j])) != 0) {
      s.width = s.width * 10 + static_cast<std::size_t>(format[j] - '0');
      if (s.width > 1000) s.width = 1000;
      ++j;
    }
    const char letter = j < format.size() ? format[j] : '\0';
    for (const Field& f : fields) {
      if (f.letter == letter) s.field = &f;
    }
    if (s.field == nullptr) {
      std::vector<std::string> known;
      for (const Field& f : fields) known.push_back(fmt::format("%{} {}", f.letter, f.meaning));
      return absl::InvalidArgumentError(fmt::format(
          "--format: no field {} at position {}; fields: {}; %.10i right-aligns in 10 columns",
          letter == '\0' ? std::string("at the end") : fmt::format("%{}", letter), i + 1,
          fmt::join(known, ", ")));
    }
    if (!literal.empty()) segments.push_back({std::move(literal)});
    literal.clear();
    segments.push_back(s);
    i = j;
  }
  if (!literal.empty()) segments.push_back({std::move(literal)});
  return segments;
}

/// A field's text as its segment lays it out.
template <typename Field>
std::string FormatCell(const FormatSegment<Field>& s, std::string text) {
  if (s.width == 0) return text;
  if (text.size() > s.width) text.resize(s.width);
  return s.right ? fmt::format("{:>{}}", text, s.width) : fmt::format("{:<{}}", text, s.width);
}

/// One line: each field's text from `value(field)`, the literals as they are.
template <typename Field, typename Value>
std::string FormatLine(const std::vector<FormatSegment<Field>>& segments, Value value) {
  std::string line;
  for (const FormatSegment<Field>& s : segments) {
    line += s.field == nullptr ? s.literal : FormatCell(s, value(*s.field));
  }
  return line;
}

}  // namespace cohort::cli
