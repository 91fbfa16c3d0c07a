// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host_resources.h"

/// The agent's command line and the settings it resolves to.
namespace cohort::agent {

/// The options as typed. Negative resource values mean "not given".
struct AgentOptions {
  std::string config_file;
  std::string controller;
  std::string node;
  int emulate = 0;
  std::string nodes;
  std::string auth_key_file;
  int cpus = -1;
  int gpus = -1;
  std::int64_t memory_mb = -1;
  std::string spool_dir;
  std::string log_level = "info";
};

/// Registers the options on `app`, with their help text.
void AddAgentOptions(CLI::App& app, AgentOptions& options);

/// One node the agent speaks for.
struct NodeSetup {
  std::string name;
  NodeResources resources;
};

/// Whether the agent is one real node or emulates several in one process.
enum class NodeMode { kReal, kEmulated };

/// What the agent runs with, every default and file already applied.
struct AgentSettings {
  std::string controller_target;  ///< a gRPC target: host:port or unix:path
  std::string auth_key;           ///< the key file's text, trailing whitespace trimmed
  std::string cluster_name;       ///< the config's ClusterName; "cohort" without one
  std::string spool_dir;          ///< where batch scripts are written
  NodeMode mode = NodeMode::kReal;
  std::vector<NodeSetup> nodes;       ///< one for a real node; one per emulated node
  std::vector<std::string> warnings;  ///< to log once logging is set up
};

/// Resolves the options: reads cohort.conf (-c) and the auth key file,
/// expands --nodes, detects this host's resources. Runs at startup; reads
/// files. Returns InvalidArgument for options that contradict each other or a
/// config with errors (its diagnostics in the message), NotFound or
/// Unavailable for files that cannot be read. Messages say what to change.
[[nodiscard]] absl::StatusOr<AgentSettings> ResolveSettings(const AgentOptions& options);

}  // namespace cohort::agent
