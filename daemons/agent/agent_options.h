// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"
#include "cohort/launch/node_layout.h"
#include "host_resources.h"
#include "image_pull.h"

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
  std::string hwloc_xml;    ///< a topology file to use instead of this machine
  bool print_node = false;  ///< print the node's NodeName line and layout, then exit
  bool fake_exec = false;   ///< emulated nodes run no process (fake_runner.h)
  int http_port = -1;       ///< --http-port: metrics; -1: none, 0: any free port
  std::string http_port_file;
  std::string http_address = "0.0.0.0";
};

/// Registers the options on `app`, with their help text.
void AddAgentOptions(CLI::App& app, AgentOptions& options);

/// One node the agent speaks for.
struct NodeSetup {
  std::string name;
  NodeResources resources;
  /// Its NUMA nodes, cores, GPUs and NICs, for binding ranks. GPUs match
  /// `resources.gpus`.
  layout::NodeLayout layout;
  /// The device file of each GPU, by index: GpuFiles= of its NodeName line,
  /// else for a real node DefaultGpuFiles(layout); an emulated node's GPUs
  /// have none unless the line names them.
  std::vector<std::string> gpu_files;
};

/// Whether the agent is one real node or emulates several in one process.
enum class NodeMode { kReal, kEmulated };

/// What the agent runs with, every default and file already applied.
struct AgentSettings {
  /// The controllers, in the order tried: gRPC targets (host:port or
  /// unix:path).
  std::vector<std::string> controller_targets;
  /// kMunge or kNone: AuthType, with an unset one resolved by whether
  /// munged answers.
  config::AuthType auth_type = config::AuthType::kMunge;
  std::string munge_socket;    ///< AuthInfo=socket=
  std::string auth_key;        ///< AuthType=none: the key file's text, whitespace trimmed
  bool tls = false;            ///< the controller serves TLS (TLSCertFile is set)
  std::string tls_ca_pem;      ///< TLSCAFile's certificates; empty: the system's CAs
  std::string agent_cert_pem;  ///< AgentCertFile: a client certificate; empty: none
  std::string agent_key_pem;   ///< AgentKeyFile
  std::string cluster_name;    ///< the config's ClusterName; "cohort" without one
  std::string spool_dir;       ///< where batch scripts are written
  /// hwloc's XML of this machine as the agent discovered it, for the PMIx
  /// servers of its stepds; empty: none (--hwloc-xml, or hwloc could not
  /// discover or write it).
  std::string host_topology_xml;
  NodeMode mode = NodeMode::kReal;
  bool fake_exec = false;                   ///< emulated nodes' launches run no process
  std::vector<NodeSetup> nodes;             ///< one for a real node; one per emulated node
  std::string health_program;               ///< HealthCheckProgram; empty: none
  std::chrono::seconds health_interval{0};  ///< HealthCheckInterval; 0: never
  std::chrono::seconds gather_interval{0};  ///< JobAcctGatherFrequency; 0: never
  int http_port = -1;                       ///< the metrics' HTTP port; -1: none
  std::string http_port_file;
  std::string http_address;
  std::string prolog;                        ///< Prolog=; empty: none
  std::string epilog;                        ///< Epilog=; empty: none
  std::chrono::seconds script_timeout{300};  ///< PrologEpilogTimeout=
  /// ContainerCacheDir= (else spool_dir/images), ContainerCacheMaxGB= in
  /// bytes, ContainerRegistryCAFile=, ContainerCredentialsFile=,
  /// ContainerRegistryMirrors=.
  step::ImageStore container_images;
  std::string container_hooks_dir;  ///< ContainerHooksDir=
  /// SwitchType=switch/nvidia_imex: SwitchParameters' imex_channel_dir and
  /// imex_dev_major; empty dir: no IMEX.
  std::string imex_channel_dir;
  int imex_dev_major = -1;
  std::vector<std::string> warnings;  ///< to log once logging is set up
};

/// Resolves the options: reads cohort.conf (-c) and the auth key file,
/// expands --nodes, discovers this host's layout (hwloc_layout.h, or the
/// --hwloc-xml file). A real node's GPUs, when neither hwloc nor /dev shows
/// any, are those of its NodeName line (Gpus=, GpuNuma=); an emulated node's
/// resources are its NodeName line's, its layout the --hwloc-xml file's or
/// one made from that line. Runs at startup; reads files. Returns
/// InvalidArgument for options that contradict each other, a config with
/// errors (its diagnostics in the message) or an unreadable --hwloc-xml,
/// NotFound or Unavailable for files that cannot be read. Messages say what
/// to change.
[[nodiscard]] absl::StatusOr<AgentSettings> ResolveSettings(const AgentOptions& options);

/// What `cohort-agent --print-node` prints: the node's NodeName line, as
/// discovery found it (`--cpus`, `--gpus`, `--memory-mb` do not apply), then
/// its NUMA nodes, GPUs and NICs as `#` comments, so that the whole text can
/// go into cohort.conf. Needs no controller and no key. Errors as
/// ResolveSettings.
[[nodiscard]] absl::StatusOr<std::string> DescribeNode(const AgentOptions& options);

}  // namespace cohort::agent
