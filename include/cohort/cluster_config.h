// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/diagnostics.h"
#include "cohort/slurm_time.h"

/// cohort.conf: the cluster's nodes, partitions and daemon settings, in
/// slurm.conf's `Key=Value` syntax with hostlists.
namespace cohort::config {

/// One node, as its `NodeName=` line declares it (hostlists already expanded).
struct NodeSpec {
  std::string name;
  int cpus = 1;
  std::int64_t memory_mb = 1;
  int gpus = 0;
  /// GpuNuma=: the NUMA node of each GPU, by GPU index; empty when unknown.
  std::vector<int> gpu_numa;
  /// Sockets=, CoresPerSocket=, ThreadsPerCore= as `cohort-agent --print-node`
  /// (and `slurmd -C`) print them; 0 when not given. Not used for placement.
  int sockets = 0;
  int cores_per_socket = 0;
  int threads_per_core = 0;
  std::vector<std::string> features;
  SourceLocation defined_at;
};

struct PartitionSpec {
  std::string name;
  std::vector<std::string> nodes;  ///< expanded, in configuration order
  bool is_default = false;
  std::chrono::seconds max_time = kUnlimited;
  std::optional<std::chrono::seconds> default_time;  ///< none: the job's limit is max_time
  std::optional<int> max_nodes;                      ///< none: unlimited
  int priority_tier = 1;
  std::vector<std::string> allow_accounts;  ///< empty: every account
  SourceLocation defined_at;
};

struct ClusterConfig {
  std::string cluster_name = "cohort";
  std::string controller_addr = "127.0.0.1";
  int controller_port = 6820;
  std::string state_dir = "/var/lib/cohort";
  std::string auth_key_file = "/etc/cohort/cohort.key";
  std::string topology_file;  ///< resolved against the config's folder; empty: none
  std::chrono::seconds node_timeout{300};
  std::chrono::seconds kill_wait{30};
  /// How commits to the state database wait for the disk: "full" (fsync
  /// every commit), "normal" (survives a controller crash, not a power
  /// loss) or "off".
  std::string state_sync = "full";
  int history_days = 30;  ///< finished jobs kept this long; 0: forever
  std::vector<NodeSpec> nodes;
  std::vector<PartitionSpec> partitions;

  /// The partition with Default=YES, else the first one; null when none.
  [[nodiscard]] const PartitionSpec* DefaultPartition() const;
  [[nodiscard]] const PartitionSpec* FindPartition(std::string_view name) const;
};

/// Reads a file for `Include=` lines. The shell passes one that reads the
/// disk; tests pass one that serves strings. Returns NotFound or another
/// error status when the file cannot be read.
using FileLoader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

struct ConfigResult {
  ClusterConfig config;
  Diagnostics diagnostics;  ///< every error and warning of the file and its includes
};

/// Parses cohort.conf text. `file` names it in diagnostics and anchors
/// relative `Include=` and `TopologyFile=` paths. Keys are case-insensitive.
/// Every problem is collected; the config is usable only when
/// `!diagnostics.HasErrors()`.
[[nodiscard]] ConfigResult ParseClusterConfig(std::string_view text, std::string_view file,
                                              const FileLoader& loader);

/// The default node of topology-only use (`cohort config check -t`, `cohort
/// place -t`): a typical 8-GPU node, stated in the output where it is used.
[[nodiscard]] NodeSpec DefaultNodeSpec(std::string name);

}  // namespace cohort::config
