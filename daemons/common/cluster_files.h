// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/diagnostics.h"

/// Reading cohort.conf and topology.conf from disk into the core's model:
/// the file I/O half of what the pure parsers do from text.
namespace cohort::shell {

/// Reads a whole file; NotFound or Unavailable with the path and errno text.
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path);

/// The cluster's shared key from `path` (AuthKeyFile), trailing whitespace
/// removed, so that the controller, the agents and the CLI compare the same
/// bytes. ReadFile's errors, or InvalidArgument when the file is empty.
[[nodiscard]] absl::StatusOr<std::string> ReadAuthKey(const std::string& path);

/// TopologyBlocks=auto: where the controller writes the blocks the nodes'
/// NVLink domains give (BlockName lines), in the config's StateDir.
[[nodiscard]] std::string NvlinkBlocksPath(const config::ClusterConfig& config);

struct ClusterPaths {
  std::optional<std::string> config;  ///< cohort.conf; none: nodes come from the topology
  std::optional<std::string>
      topology;  ///< topology.conf or .yaml; none: from the config, beside it, or flat
  /// Instead of the config's StateDir (cohort-controller --state-dir): where
  /// TopologyBlocks=auto's reported blocks are read.
  std::optional<std::string> state_dir;
};

/// A validated cluster: configuration, topology and a pool over them.
struct LoadedCluster {
  config::ClusterConfig config;
  topology::Topology topology;
  std::optional<alloc::NodePool> pool;  ///< set when there are no errors
  std::string config_path;              ///< empty when none was read
  std::string topology_path;            ///< empty for a flat cluster
  bool default_nodes = false;           ///< nodes took DefaultNodeSpec (no cohort.conf)
  Diagnostics diagnostics;              ///< of every file read
};

/// Loads the files. Without `topology`, uses the config's TopologyFile=, else
/// topology.yaml or topology.conf beside cohort.conf when one exists (the YAML
/// first, as Slurm 25.05 reads them), else a flat network.
/// Without `config`, the nodes are those the topology names, each a
/// DefaultNodeSpec. Problems land in `diagnostics`; the result is usable
/// only when it has no errors.
[[nodiscard]] LoadedCluster LoadCluster(const ClusterPaths& paths);

/// Prints the findings to stderr and, when any is an error, a closing count.
/// Returns false when there is an error.
bool ReportDiagnostics(const LoadedCluster& loaded);

}  // namespace cohort::shell
