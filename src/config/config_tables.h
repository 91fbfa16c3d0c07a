// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "cohort/config/cluster_config.h"
#include "cohort/diagnostics.h"
#include "config/conf_lexer.h"
#include "config/key_table.h"

/// The key tables of cohort.conf: for each kind of line, one row per key
/// with the function that parses its value into the line's target. The same
/// rows serve the parser, its "did you mean" hints, KnownKeys() and the test
/// that holds docs/configuration.md to them.
namespace cohort::config {

/// What the rows of one kind of line write into while the parser reads a
/// line (the state of its conf::KeyTable): `target` is the spec, or the
/// whole config for global keys; the other members are what the parser
/// needs of the line once it is read.
struct GlobalLine {
  ClusterConfig& target;
  std::string_view file;  ///< the file of the line: relative paths are resolved against it
  absl::FunctionRef<void(const conf::Word&)> include;  ///< reads an Include= file in place
};
struct NodeLine {
  NodeSpec target;
  const conf::Word* gpu_numa_word = nullptr;   ///< where GpuNuma= was set on this line
  const conf::Word* gpus_word = nullptr;       ///< where Gpus= was set on this line
  const conf::Word* gres_word = nullptr;       ///< where Gres= was set on this line
  const conf::Word* gpu_files_word = nullptr;  ///< where GpuFiles= was set on this line
  int gres_gpus = 0;                           ///< the count Gres= gave
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

/// The table of each kind of line, built on first use.
const conf::KeyTable<GlobalLine>& GlobalKeys();
const conf::KeyTable<NodeLine>& NodeKeys();
const conf::KeyTable<PartitionLine>& PartitionKeys();
const conf::KeyTable<QosLine>& QosKeys();
const conf::KeyTable<AccountLine>& AccountKeys();

/// Whether `key` starts a NodeName, PartitionName, QOSName or AccountName line.
[[nodiscard]] bool IsLineKey(std::string_view key);

}  // namespace cohort::config
