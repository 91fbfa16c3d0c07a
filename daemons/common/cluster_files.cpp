// SPDX-License-Identifier: Apache-2.0
#include "cluster_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "cohort/fmt_absl.h"
#include "cohort/plugin.h"

namespace cohort::shell {

namespace {

// Whether `path` names something; a path that cannot be looked at (a
// folder on the way that may not be searched) is as good as absent, and
// never an exception on a reload.
bool Exists(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message = fmt::format("cannot read {}: {}", path, std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::UnavailableError(message);
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::string> ReadAuthKey(const std::string& path) {
  absl::StatusOr<std::string> key = ReadFile(path);
  if (!key.ok()) return key.status();
  const std::size_t end = key->find_last_not_of(" \t\r\n\v\f");
  key->erase(end == std::string::npos ? 0 : end + 1);
  if (key->empty()) return absl::InvalidArgumentError(fmt::format("{} is empty", path));
  return key;
}

std::string NvlinkBlocksPath(const config::ClusterConfig& config) {
  return (std::filesystem::path(config.state_dir) / "nvlink-blocks.conf").string();
}

LoadedCluster LoadCluster(const ClusterPaths& paths) {
  LoadedCluster loaded;
  std::vector<std::string> node_names;
  topology::NodeSource source = topology::NodeSource::kTopology;

  if (paths.config) {
    loaded.config_path = *paths.config;
    absl::StatusOr<std::string> text = ReadFile(*paths.config);
    if (!text.ok()) {
      loaded.diagnostics.Error({*paths.config, 0, 0}, std::string(text.status().message()),
                               "pass the path of cohort.conf with -c");
      return loaded;
    }
    config::ConfigResult parsed = config::ParseClusterConfig(*text, *paths.config, ReadFile);
    loaded.diagnostics.Append(parsed.diagnostics);
    loaded.config = std::move(parsed.config);
    for (const config::NodeSpec& node : loaded.config.nodes) node_names.push_back(node.name);
    source = topology::NodeSource::kConfig;
  }

  if (paths.topology) {
    loaded.topology_path = *paths.topology;
  } else if (!loaded.config.topology_file.empty()) {
    loaded.topology_path = loaded.config.topology_file;
  } else if (paths.config) {
    // As Slurm 25.05: topology.yaml first; beside it, topology.conf is unused.
    const std::filesystem::path folder = std::filesystem::path(*paths.config).parent_path();
    const std::filesystem::path yaml = folder / "topology.yaml";
    const std::filesystem::path conf = folder / "topology.conf";
    if (Exists(yaml)) {
      loaded.topology_path = yaml.string();
      if (Exists(conf)) {
        loaded.diagnostics.Warning({conf.string(), 0, 0},
                                   "topology.conf is not read: topology.yaml beside it is",
                                   "remove the one that is out of date");
      }
    } else if (Exists(conf)) {
      loaded.topology_path = conf.string();
    }
  }

  // TopologyBlocks=auto: the blocks the nodes reported, as the controller
  // wrote them; none yet before the first report.
  std::optional<topology::ReportedBlocks> reported;
  if (paths.state_dir) loaded.config.state_dir = *paths.state_dir;
  if (paths.config && loaded.config.topology_blocks == "auto") {
    reported.emplace();
    reported->file = NvlinkBlocksPath(loaded.config);
    if (Exists(reported->file)) {
      absl::StatusOr<std::string> text = ReadFile(reported->file);
      if (text.ok()) {
        reported->text = *std::move(text);
      } else {
        loaded.diagnostics.Warning({reported->file, 0, 0}, std::string(text.status().message()),
                                   "the blocks are empty until the controller can write it");
      }
    }
  }
  const topology::ReportedBlocks* blocks = reported ? &*reported : nullptr;

  if (loaded.topology_path.empty()) {
    if (!paths.config) {
      loaded.diagnostics.Error({}, "no configuration given",
                               "pass -c cohort.conf, -t topology.conf, or both");
      return loaded;
    }
    if (blocks != nullptr) {
      topology::TopologyResult built = topology::BuildTopology("", "", node_names, source, blocks);
      loaded.diagnostics.Append(built.diagnostics);
      loaded.topology = std::move(built.topology);
    } else {
      loaded.topology = topology::FlatTopology(node_names);
    }
  } else {
    absl::StatusOr<std::string> text = ReadFile(loaded.topology_path);
    if (!text.ok()) {
      loaded.diagnostics.Error({loaded.topology_path, 0, 0}, std::string(text.status().message()),
                               "pass the path of topology.conf with -t");
      return loaded;
    }
    topology::TopologyResult built =
        topology::BuildTopology(*text, loaded.topology_path, node_names, source, blocks);
    loaded.diagnostics.Append(built.diagnostics);
    loaded.topology = std::move(built.topology);
  }

  if (!paths.config) {
    loaded.default_nodes = true;
    for (const std::string& name : loaded.topology.NodeNames()) {
      loaded.config.nodes.push_back(config::DefaultNodeSpec(name));
    }
    config::PartitionSpec all;
    all.name = "all";
    all.is_default = true;
    all.nodes = loaded.topology.NodeNames();
    loaded.config.partitions.push_back(std::move(all));
  }

  if (absl::StatusOr<plugin::PluginSet> plugins = plugin::MakePlugins(loaded.config.plugins);
      !plugins.ok()) {
    loaded.diagnostics.Error({loaded.config_path, 0, 0}, std::string(plugins.status().message()),
                             "plugins/builtin.cpp registers the policies that exist; see the "
                             "Scheduler policies section of docs/configuration.md");
  }
  if (loaded.diagnostics.HasErrors()) return loaded;
  absl::StatusOr<alloc::NodePool> pool =
      alloc::NodePool::Create(loaded.topology, loaded.config.nodes, loaded.config.partitions);
  if (!pool.ok()) {
    loaded.diagnostics.Error({loaded.config_path, 0, 0}, std::string(pool.status().message()));
    return loaded;
  }
  loaded.pool = *std::move(pool);
  return loaded;
}

bool ReportDiagnostics(const LoadedCluster& loaded) {
  std::cerr << loaded.diagnostics.Format();
  if (!loaded.diagnostics.HasErrors()) return true;
  std::cerr << fmt::format("{} error{}; nothing was changed\n", loaded.diagnostics.ErrorCount(),
                           loaded.diagnostics.ErrorCount() == 1 ? "" : "s");
  return false;
}

}  // namespace cohort::shell
