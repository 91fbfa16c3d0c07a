// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/diagnostics.h"
#include "config/conf_lexer.h"

/// Key tables: one row per key of a kind of line, with the function that
/// parses the key's value into what the line defines. One table serves the
/// parsing, the "did you mean" hints and the list of known keys.
namespace cohort::conf {

/// Parses one word's value into `state`, what the parser keeps of the line
/// being read (its `target` member is what the line defines); false after
/// reporting an error.
template <typename State>
using KeyParser = bool (*)(const Word& word, State& state, Diagnostics& diagnostics);

template <typename State>
struct KeyRow {
  std::string_view key;  ///< as the docs spell it; matched in any case
  KeyParser<State> parse;
};

/// The value parser `Parse` (`bool Parse(const Word&, T&, Diagnostics&)`)
/// applied to the field that `Path` leads to from `state.target`
/// (`&ClusterConfig::priority, &PriorityWeights::age`). An optional field is
/// set only when the value parses, so a bad value leaves the previous one.
template <typename State, auto Parse, auto... Path>
bool Set(const Word& word, State& state, Diagnostics& diagnostics) {
  // clang-format off
  auto& field = (state.target .* ... .* Path);
  // clang-format on
  using Field = std::remove_reference_t<decltype(field)>;
  if constexpr (std::is_invocable_r_v<bool, decltype(Parse), const Word&, Field&, Diagnostics&>) {
    return Parse(word, field, diagnostics);
  } else {
    typename Field::value_type value{};
    if (!Parse(word, value, diagnostics)) return false;
    field = std::move(value);
    return true;
  }
}

/// Whether a table's rows all have a key (for static_assert: a row left
/// empty, as an array of the wrong size leaves its last ones, would match no
/// word and give the hints an empty key). The parser is not compared here:
/// under the sanitizers a function's address is no constant expression, and
/// a row with a key always names its parser.
template <typename State, std::size_t kSize>
constexpr bool AllFilled(const std::array<KeyRow<State>, kSize>& rows) {
  return std::all_of(rows.begin(), rows.end(),
                     [](const KeyRow<State>& row) { return !row.key.empty(); });
}

/// The order a KeyTable searches in: shorter keys first, then letters in any
/// case. Most steps of a search are decided by the length alone, as
/// EqualsIgnoreCase decides most mismatches.
[[nodiscard]] inline bool KeyLess(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    if (lower(a[i]) != lower(b[i])) return lower(a[i]) < lower(b[i]);
  }
  return false;
}

/// One kind of line's rows, found by key in any case with a binary search
/// (the controller reads 16,384-node files at start). Immutable once built;
/// any thread may read it.
template <typename State>
class KeyTable {
 public:
  /// `head` is the key that starts the line (empty for a file's global
  /// keys); `context` ends an unknown key's message ("in a NodeName line");
  /// `also_hinted` are keys the hints offer beyond the rows and the head.
  /// `rows` must outlive the table.
  KeyTable(std::string_view head, std::string_view context, std::span<const KeyRow<State>> rows,
           std::span<const std::string_view> also_hinted = {})
      : context_(context), rows_(rows) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      by_key_.push_back(static_cast<std::uint16_t>(i));
      keys_.push_back(rows[i].key);
    }
    std::sort(by_key_.begin(), by_key_.end(),
              [&](std::uint16_t a, std::uint16_t b) { return KeyLess(rows[a].key, rows[b].key); });
    if (!head.empty()) keys_.push_back(head);
    hinted_ = keys_;
    hinted_.insert(hinted_.end(), also_hinted.begin(), also_hinted.end());
  }

  /// The row of `key` (any case), or null.
  [[nodiscard]] const KeyRow<State>* Find(std::string_view key) const {
    const auto it = std::lower_bound(
        by_key_.begin(), by_key_.end(), key,
        [&](std::uint16_t row, std::string_view k) { return KeyLess(rows_[row].key, k); });
    if (it == by_key_.end() || !EqualsIgnoreCase(rows_[*it].key, key)) return nullptr;
    return &rows_[*it];
  }

  /// Parses every word of `line` after its first through the rows; a word
  /// with no row is reported with the nearest key. Every word is read even
  /// after an error; returns false after any.
  [[nodiscard]] bool ParseWords(const Line& line, State& state, Diagnostics& diagnostics) const {
    bool ok = true;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const Word& word = line.words[i];
      if (const KeyRow<State>* row = Find(word.key); row != nullptr) {
        ok &= row->parse(word, state, diagnostics);
      } else {
        ReportUnknown(word, diagnostics);
        ok = false;
      }
    }
    return ok;
  }

  /// Reports `word` as a key this kind of line does not know.
  void ReportUnknown(const Word& word, Diagnostics& diagnostics) const {
    ReportUnknownKey(word, context_, hinted_, diagnostics);
  }

  /// The rows' keys in table order, then the head.
  [[nodiscard]] std::span<const std::string_view> Keys() const { return keys_; }

 private:
  std::string_view context_;
  std::span<const KeyRow<State>> rows_;
  std::vector<std::uint16_t> by_key_;  ///< indexes of rows_, in KeyLess order
  std::vector<std::string_view> keys_;
  std::vector<std::string_view> hinted_;  ///< keys_ then also_hinted
};

}  // namespace cohort::conf
