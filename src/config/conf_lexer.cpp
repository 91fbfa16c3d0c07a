// SPDX-License-Identifier: Apache-2.0
#include "config/conf_lexer.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "cohort/text/hostlist.h"

namespace cohort::conf {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Walks the text character by character, keeping line and column, so that
// every word knows where it came from even across continuation lines.
class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file, Diagnostics& diagnostics)
      : text_(text), file_(file), diagnostics_(diagnostics) {}

  std::vector<Line> Run() {
    std::vector<Line> lines;
    Line current;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        Advance();
        Flush(current, lines);
      } else if (IsSpace(c)) {
        Advance();
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') Advance();
      } else if (c == '\\' && IsContinuation()) {
        // `\` at the end of a line joins the next line to this one.
        while (text_[pos_] != '\n') Advance();
        Advance();
      } else {
        ReadWord(current);
      }
    }
    Flush(current, lines);
    return lines;
  }

 private:
  bool IsContinuation() const {
    std::size_t p = pos_ + 1;
    while (p < text_.size() && IsSpace(text_[p])) ++p;
    return p < text_.size() && text_[p] == '\n';
  }

  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  SourceLocation Here() const { return {std::string(file_), line_, column_}; }

  static void Flush(Line& current, std::vector<Line>& lines) {
    if (!current.words.empty()) lines.push_back(std::move(current));
    current = Line{};
  }

  void ReadWord(Line& current) {
    Word word;
    word.key_at = Here();
    std::string raw;
    bool has_equals = false;
    bool ok = true;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (IsSpace(c) || c == '\n' || c == '#') break;
      if (c == '\\' && IsContinuation()) break;
      if (c == '=' && !has_equals) {
        has_equals = true;
        word.key = raw;
        raw.clear();
        Advance();
        word.value_at = Here();
        continue;
      }
      if (c == '"' && has_equals) {
        const SourceLocation quote_at = Here();
        Advance();
        while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
          raw += text_[pos_];
          Advance();
        }
        if (pos_ >= text_.size() || text_[pos_] != '"') {
          diagnostics_.Error(quote_at, "unterminated quote", "close the value with '\"'");
          ok = false;
          break;
        }
        Advance();
        continue;
      }
      raw += c;
      Advance();
    }
    if (!ok) return;
    if (!has_equals) {
      diagnostics_.Error(word.key_at, fmt::format("expected Key=Value, found \"{}\"", raw),
                         "write each setting as Key=Value with no spaces around '='");
      return;
    }
    if (word.key.empty()) {
      diagnostics_.Error(word.key_at, "missing key before '='", "write Key=Value");
      return;
    }
    word.value = std::move(raw);
    current.words.push_back(std::move(word));
  }

  std::string_view text_;
  std::string_view file_;
  Diagnostics& diagnostics_;
  std::size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace

std::vector<Line> Lex(std::string_view text, std::string_view file, Diagnostics& diagnostics) {
  return Lexer(text, file, diagnostics).Run();
}

void ReportUnknownKey(const Word& word, std::string_view context,
                      std::span<const std::string_view> known, Diagnostics& diagnostics) {
  const std::string nearest = NearestWord(word.key, known);
  std::string hint;
  if (!nearest.empty()) {
    hint = fmt::format("did you mean {}?", nearest);
  } else {
    hint = fmt::format("known keys: {}", fmt::join(known, ", "));
  }
  diagnostics.Error(word.key_at, fmt::format("unknown key \"{}\" {}", word.key, context),
                    std::move(hint));
}

bool ParseInt(const Word& word, ZeroPolicy zero, long long& out, Diagnostics& diagnostics) {
  long long value = 0;
  const std::string& v = word.value;
  const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), value);
  const long long minimum = zero == ZeroPolicy::kAllowZero ? 0 : 1;
  if (v.empty() || error != std::errc() || end != v.data() + v.size() || value < minimum) {
    diagnostics.Error(word.value_at,
                      fmt::format("{} must be {} integer, found \"{}\"", word.key,
                                  minimum == 0 ? "a non-negative" : "a positive", v),
                      fmt::format("write {}=<number>", word.key));
    return false;
  }
  out = value;
  return true;
}

bool ParseYesNo(const Word& word, bool& out, Diagnostics& diagnostics) {
  const std::string& v = word.value;
  if (EqualsIgnoreCase(v, "YES") || EqualsIgnoreCase(v, "TRUE") || v == "1") {
    out = true;
    return true;
  }
  if (EqualsIgnoreCase(v, "NO") || EqualsIgnoreCase(v, "FALSE") || v == "0") {
    out = false;
    return true;
  }
  diagnostics.Error(word.value_at, fmt::format("{} must be YES or NO, found \"{}\"", word.key, v),
                    fmt::format("write {}=YES or {}=NO", word.key, word.key));
  return false;
}

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
    if (end > start) items.emplace_back(text.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

bool ExpandHostlistValue(const Word& word, std::vector<std::string>& out,
                         Diagnostics& diagnostics) {
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(word.value);
  if (names.ok()) {
    out = *std::move(names);
    return true;
  }
  // Point at the faulty character when the hostlist error names its position.
  SourceLocation at = word.value_at;
  const std::string message(names.status().message());
  constexpr std::string_view kPosition = "position ";
  if (const std::size_t p = message.find(kPosition); p != std::string::npos) {
    int position = 0;
    const char* first = message.data() + p + kPosition.size();
    const auto [end, error] = std::from_chars(first, message.data() + message.size(), position);
    if (error == std::errc() && position > 0) at.column += position - 1;
  }
  diagnostics.Error(at, fmt::format("{}: {}", word.key, message),
                    "hostlists look like gpu[001-064] or a[1,3,5-7],b2");
  return false;
}

}  // namespace cohort::conf
