// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/directives.h"

#include <optional>

#include <fmt/format.h>

namespace cohort::directives {
namespace {

constexpr std::string_view kSbatch = "#SBATCH";
constexpr std::string_view kCohort = "#COHORT";

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The prefix `text` starts with, followed by a blank or the end; `exact`
// compares case-sensitively, as sbatch does.
enum class Match { kExact, kIgnoringCase };
std::optional<Prefix> StartsWithPrefix(std::string_view text, Match match) {
  for (const Prefix prefix : {Prefix::kSbatch, Prefix::kCohort}) {
    const std::string_view word = PrefixText(prefix);
    if (text.size() < word.size()) continue;
    const std::string_view head = text.substr(0, word.size());
    const bool same = match == Match::kExact ? head == word : EqualsIgnoreCase(head, word);
    if (same && (text.size() == word.size() || IsBlank(text[word.size()]))) return prefix;
  }
  return std::nullopt;
}

// A directive's options split into words, or the 0-based offset and kind of a
// quote left open.
struct Words {
  std::vector<std::string> words;
  std::optional<std::size_t> open_quote;
  char quote = '\0';
};

Words SplitWords(std::string_view text) {
  Words out;
  std::string word;
  bool in_word = false;
  char quote = '\0';
  std::size_t quote_at = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      // As sbatch: a backslash takes the next character literally, inside
      // quotes too; a trailing one is dropped.
      in_word = true;
      if (i + 1 < text.size()) word += text[++i];
      continue;
    }
    if (quote != '\0') {
      if (c == quote) {
        quote = '\0';
      } else {
        word += c;
      }
      continue;
    }
    if (IsBlank(c)) {
      if (in_word) out.words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    if (c == '#' && !in_word) break;  // a comment to the end of the line
    in_word = true;
    if (c == '\'' || c == '"') {
      quote = c;
      quote_at = i;
      continue;
    }
    word += c;
  }
  if (quote != '\0') {
    out.open_quote = quote_at;
    out.quote = quote;
    return out;
  }
  if (in_word) out.words.push_back(std::move(word));
  return out;
}

}  // namespace

std::string_view PrefixText(Prefix prefix) { return prefix == Prefix::kSbatch ? kSbatch : kCohort; }

DirectiveResult ParseDirectives(std::string_view script, std::string_view file) {
  DirectiveResult result;
  int line_number = 0;
  int first_command = 0;  // the line that ended the directives; 0 while reading them
  std::size_t start = 0;
  while (start < script.size()) {
    std::size_t end = script.find('\n', start);
    if (end == std::string_view::npos) end = script.size();
    std::string_view line = script.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    const std::size_t indent = line.find_first_not_of(" \t");
    if (indent == std::string_view::npos) continue;  // blank
    const std::string_view text = line.substr(indent);
    const SourceLocation where{std::string(file), line_number, static_cast<int>(indent) + 1};
    const std::optional<Prefix> lookalike = StartsWithPrefix(text, Match::kIgnoringCase);

    if (first_command != 0) {
      if (lookalike) {
        result.diagnostics.Warning(
            where,
            fmt::format("{} after the first command (line {}) is ignored",
                        text.substr(0, kSbatch.size()), first_command),
            fmt::format("move it above line {}: sbatch reads directives only before the first "
                        "command",
                        first_command));
      }
      continue;
    }
    if (text.front() != '#') {
      first_command = line_number;
      continue;
    }
    const std::optional<Prefix> prefix = StartsWithPrefix(line, Match::kExact);
    if (!prefix) {
      if (lookalike && indent > 0) {
        result.diagnostics.Warning(
            where, fmt::format("an indented {} is ignored", text.substr(0, kSbatch.size())),
            "start the line with it: sbatch reads directives only in the first column");
      } else if (lookalike) {
        result.diagnostics.Warning(
            where,
            fmt::format("{} is not a directive and is ignored", text.substr(0, kSbatch.size())),
            fmt::format("write {} in capitals", PrefixText(*lookalike)));
      }
      continue;  // a comment
    }
    const std::string_view options = line.substr(PrefixText(*prefix).size());
    Words words = SplitWords(options);
    if (words.open_quote) {
      const int column = static_cast<int>(PrefixText(*prefix).size() + *words.open_quote) + 1;
      result.diagnostics.Error(
          {std::string(file), line_number, column},
          fmt::format("unmatched {} in the {} line", words.quote, PrefixText(*prefix)),
          fmt::format("close the quote, or write \\{} for the character itself", words.quote));
      continue;
    }
    if (words.words.empty()) continue;
    result.directives.push_back({line_number, *prefix, std::move(words.words)});
  }
  return result;
}

}  // namespace cohort::directives
