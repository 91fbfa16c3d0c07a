// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "cohort/cluster_config.h"
#include "cohort/diagnostics.h"
#include "conf_lexer.h"

/// The key tables of cohort.conf: for each kind of line, one row per key
/// with the function that parses its value into the line's target. The same
/// rows serve the parser, its "did you mean" hints, KnownKeys() and the test
/// that holds docs/configuration.md to them.
namespace cohort::config {

/// What the rows of one kind of line write into while the parser reads a
/// line: `target` is the spec (or the whole config, for global keys), the
/// other members what the parser needs of the line once it is read.
struct GlobalLine {
  ClusterConfig& target;
  std::string_view file;  ///< the file of the line: relative paths are resolved against it
  absl::FunctionRef<void(const conf::Word&)> include;  ///< reads an Include= file in place
};
struct NodeLine {
  NodeSpec target;
  const conf::Word* gpu_numa_word = nullptr;  ///< where GpuNuma= was set on this line
};
struct PartitionLine {
  PartitionSpec target;
  bool all_nodes = false;                  ///< Nodes=ALL
  std::optional<SourceLocation> nodes_at;  ///< where this line's Nodes= hostlist is
};
struct QosLine {
  QosSpec target;
  SourceLocation preempt_at;  ///< where Preempt= was set (on this line or a DEFAULT one)
};
struct AccountLine {
  AccountSpec target;
};

/// Parses one word's value into `line`; false after reporting an error.
template <typename Line>
using KeyParser = bool (*)(const conf::Word& word, Line& line, Diagnostics& diagnostics);

template <typename Line>
struct KeyRow {
  std::string_view key;  ///< as the docs spell it; matched in any case
  KeyParser<Line> parse;
};

/// The value parser `Parse` (config_values.h) applied to the field that
/// `Path` leads to from the line's target (`&ClusterConfig::priority,
/// &PriorityWeights::age`). An optional field is set only when the value
/// parses, so a bad value leaves a DEFAULT line's value in place.
template <typename Line, auto Parse, auto... Path>
bool Set(const conf::Word& word, Line& line, Diagnostics& diagnostics) {
  // clang-format off
  auto& field = (line.target .* ... .* Path);
  // clang-format on
  using Field = std::remove_reference_t<decltype(field)>;
  if constexpr (std::is_invocable_r_v<bool, decltype(Parse), const conf::Word&, Field&,
                                      Diagnostics&>) {
    return Parse(word, field, diagnostics);
  } else {
    typename Field::value_type value{};
    if (!Parse(word, value, diagnostics)) return false;
    field = std::move(value);
    return true;
  }
}

/// One kind of line's rows, found by key in any case with a binary search
/// (the controller reads 16,384-node files at start).
template <typename Line>
class KeyTable {
 public:
  /// `head` is the key that starts the line (empty for global keys);
  /// `also_hinted` are keys the hints offer beyond the rows and the head.
  KeyTable(std::string_view head, std::string_view context, std::span<const KeyRow<Line>> rows,
           std::span<const std::string_view> also_hinted = {});

  /// The row of `key` (any case), or null.
  [[nodiscard]] const KeyRow<Line>* Find(std::string_view key) const;
  /// Parses every word of `line` after its first through the rows; a word
  /// with no row is reported with the nearest key. Returns false after any
  /// error.
  [[nodiscard]] bool ParseWords(const conf::Line& line, Line& state,
                                Diagnostics& diagnostics) const;
  /// Reports `word` as a key this kind of line does not know.
  void ReportUnknown(const conf::Word& word, Diagnostics& diagnostics) const;
  /// The rows' keys in table order, then the head: what KnownKeys() returns.
  [[nodiscard]] std::span<const std::string_view> Keys() const { return keys_; }

 private:
  std::string_view context_;  ///< "in a NodeName line", for unknown keys
  std::span<const KeyRow<Line>> rows_;
  std::vector<std::uint8_t> by_key_;  ///< indexes of rows_, in case-insensitive key order
  std::vector<std::string_view> keys_;
  std::vector<std::string_view> hinted_;  ///< keys_ then also_hinted
};

const KeyTable<GlobalLine>& GlobalKeys();
const KeyTable<NodeLine>& NodeKeys();
const KeyTable<PartitionLine>& PartitionKeys();
const KeyTable<QosLine>& QosKeys();
const KeyTable<AccountLine>& AccountKeys();

/// Whether `key` starts a NodeName, PartitionName, QOSName or AccountName line.
[[nodiscard]] bool IsLineKey(std::string_view key);

}  // namespace cohort::config
