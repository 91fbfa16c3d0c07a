// SPDX-License-Identifier: Apache-2.0
#include "agent_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "cluster_files.h"
#include "cohort/config/cluster_config.h"
#include "cohort/config/controller_addrs.h"
#include "cohort/text/hostlist.h"
#include "hwloc_layout.h"
#include "launch_isolation.h"
#include "munge_credential.h"
#include "nvml_fabric.h"
#include "tls_files.h"

namespace cohort::agent {
namespace {

// Characters a node name cannot hold: they would break hostlists, file names
// in the spool, or log lines.
bool ValidNodeName(std::string_view name) {
  return !name.empty() && name.find_first_of(",[]/ \t\r\n") == std::string_view::npos;
}

std::string ShortHostName() {
  std::array<char, 256> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return {};
  std::string name(buffer.data());
  return name.substr(0, name.find('.'));
}

absl::StatusOr<config::ClusterConfig> LoadConfig(const std::string& path) {
  if (path.empty()) return config::ClusterConfig{};
  absl::StatusOr<std::string> text = shell::ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        fmt::format("{}; pass the path of cohort.conf with -c",
                                    std::string_view(text.status().message())));
  }
  config::ConfigResult parsed = config::ParseClusterConfig(*text, path, shell::ReadFile);
  if (parsed.diagnostics.HasErrors()) {
    std::string report = parsed.diagnostics.Format();
    while (!report.empty() && report.back() == '\n') report.pop_back();
    return absl::InvalidArgumentError(
        fmt::format("cannot use {}:\n{}\n{} error{}; fix them (`cohort config check -c {}` "
                    "shows them too)",
                    path, report, parsed.diagnostics.ErrorCount(),
                    parsed.diagnostics.ErrorCount() == 1 ? "" : "s", path));
  }
  return std::move(parsed.config);
}

absl::StatusOr<std::string> ReadAuthKey(const std::string& path, std::string_view source) {
  absl::StatusOr<std::string> key = shell::ReadAuthKey(path);
  if (key.ok()) return key;
  if (key.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(fmt::format(
        "auth key file {} ({}) is empty; write the cluster's shared key into it", path, source));
  }
  return absl::Status(key.status().code(),
                      fmt::format("auth key ({}): {}; pass the cluster's key file with "
                                  "--auth-key-file or AuthKeyFile= in cohort.conf",
                                  source, std::string_view(key.status().message())));
}

absl::StatusOr<std::vector<std::string>> NodeNames(const AgentOptions& options) {
  if (options.emulate == 0) {
    std::string name = options.node.empty() ? ShortHostName() : options.node;
    if (!ValidNodeName(name)) {
      return absl::InvalidArgumentError(
          fmt::format("node name \"{}\" is not usable (empty, or holds one of , [ ] / or a "
                      "space); pass --node NAME",
                      name));
    }
    return std::vector<std::string>{std::move(name)};
  }
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(options.nodes);
  if (!names.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("--nodes: {}", std::string_view(names.status().message())));
  }
  if (names->size() != static_cast<std::size_t>(options.emulate)) {
    return absl::InvalidArgumentError(fmt::format(
        "--emulate {} asks for {} node{} but --nodes {} names {}; make them match", options.emulate,
        options.emulate, options.emulate == 1 ? "" : "s", options.nodes, names->size()));
  }
  std::set<std::string_view> seen;
  for (const std::string& name : *names) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(fmt::format(
          "--nodes {} names {} twice; each emulated node needs its own name", options.nodes, name));
    }
  }
  return names;
}

NodeResources Override(NodeResources resources, const AgentOptions& options) {
  if (options.cpus >= 0) resources.cpus = options.cpus;
  if (options.gpus >= 0) resources.gpus = options.gpus;
  if (options.memory_mb >= 0) resources.memory_mb = options.memory_mb;
  return resources;
}

// This host's layout: the --hwloc-xml file, else hwloc on this machine, else
// (hwloc failing, with a warning) sysconf's counts on one NUMA node.
absl::StatusOr<layout::NodeLayout> HostLayout(const AgentOptions& options,
                                              std::vector<std::string>& warnings,
                                              std::string* xml = nullptr) {
  if (!options.hwloc_xml.empty()) {
    absl::StatusOr<layout::NodeLayout> from_file = LoadLayoutFromXml(options.hwloc_xml);
    if (!from_file.ok()) {
      return absl::Status(
          from_file.status().code(),
          fmt::format("--hwloc-xml: {}", std::string_view(from_file.status().message())));
    }
    return from_file;
  }
  absl::StatusOr<layout::NodeLayout> discovered = DiscoverHostLayout(xml);
  if (discovered.ok()) return discovered;
  warnings.push_back(fmt::format("hwloc_failed error=\"{}\" using=sysconf numa=unknown",
                                 std::string_view(discovered.status().message())));
  const NodeResources counts = DetectHostResources();
  layout::NodeLayout fallback =
      layout::ApproximateLayout(counts.cpus, counts.memory_mb, counts.gpus, {});
  for (layout::Gpu& gpu : fallback.gpus) gpu.numa = -1;
  return fallback;
}

// A real node's GPUs that neither hwloc nor /dev placed: its NodeName line's
// (Gpus=, with GpuNuma= when given) when none were found, or just their NUMA
// nodes when the counts agree and the locality is unknown.
void UseConfiguredGpus(layout::NodeLayout& node, const config::NodeSpec* spec) {
  if (spec == nullptr) return;
  if (node.gpus.empty()) {
    node.gpus = layout::ConfiguredGpus(spec->gpus, spec->gpu_numa);
    return;
  }
  const bool unknown = std::all_of(node.gpus.begin(), node.gpus.end(),
                                   [](const layout::Gpu& gpu) { return gpu.numa < 0; });
  if (unknown && spec->gpu_numa.size() == node.gpus.size()) {
    for (std::size_t i = 0; i < node.gpus.size(); ++i) node.gpus[i].numa = spec->gpu_numa[i];
  }
}

// Makes the layout hold the `gpus` GPUs the node reports (--gpus, an
// emulated node's line): its first ones, then GPUs of unknown locality.
void FitGpus(layout::NodeLayout& node, int gpus) {
  if (gpus < 0) return;
  if (node.gpus.size() > static_cast<std::size_t>(gpus)) {
    node.gpus.resize(static_cast<std::size_t>(gpus));
  }
  while (node.gpus.size() < static_cast<std::size_t>(gpus)) {
    const int index = static_cast<int>(node.gpus.size());
    node.gpus.push_back({.index = index, .name = "reported", .pci_bus_id = {}, .numa = -1});
  }
}

const config::NodeSpec* FindNode(const config::ClusterConfig& config, std::string_view name) {
  for (const config::NodeSpec& spec : config.nodes) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

NodeSetup MakeSetup(std::string name, NodeResources resources, layout::NodeLayout node,
                    const AgentOptions& options) {
  resources = Override(std::move(resources), options);
  FitGpus(node, resources.gpus);
  resources.gpu_groups = layout::GpuGroups(node);
  return {std::move(name), std::move(resources), std::move(node), {}};
}

}  // namespace

void AddAgentOptions(CLI::App& app, AgentOptions& options) {
  app.add_option("-c,--config", options.config_file,
                 "cohort.conf to read: ControllerAddr, ControllerPort, AuthKeyFile, ClusterName, "
                 "and the NodeName lines emulated nodes report")
      ->check(CLI::ExistingFile);
  app.add_option("--controller", options.controller,
                 "the controllers to dial, HOST:PORT or unix:PATH, several separated by commas "
                 "and tried in order (default: ControllerAddr and ControllerPort of the config, "
                 "else 127.0.0.1:6820)");
  CLI::Option* node =
      app.add_option("--node", options.node,
                     "this node's name, as cohort.conf names it (default: the host's "
                     "short name)");
  CLI::Option* emulate =
      app.add_option("--emulate", options.emulate,
                     "emulate N nodes in this one process, named by --nodes (tests, benchmarks)")
          ->check(CLI::PositiveNumber);
  CLI::Option* nodes =
      app.add_option("--nodes", options.nodes, "hostlist of the emulated nodes; N names");
  emulate->needs(nodes);
  nodes->needs(emulate);
  node->excludes(emulate);
  app.add_option("--auth-key-file", options.auth_key_file,
                 "file holding the cluster's shared key (default: AuthKeyFile of the config, "
                 "else /etc/cohort/cohort.key)");
  app.add_option("--cpus", options.cpus,
                 "CPUs to report (default: an emulated node's NodeName line, else this host's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpus", options.gpus,
                 "GPUs to report (default: an emulated node's NodeName line, else the number of "
                 "/dev/nvidia<N> devices)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-mb", options.memory_mb,
                 "memory in MB to report (default: an emulated node's NodeName line, else this "
                 "host's physical memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--spool", options.spool_dir,
                 "folder for batch scripts (default: /tmp/cohort-agent-<uid>)");
  app.add_option("--http-port", options.http_port,
                 "serve Prometheus metrics at /metrics on this port (0 picks a free one; default: "
                 "none)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--http-port-file", options.http_port_file,
                 "write the metrics' port to this file");
  app.add_option("--http-address", options.http_address,
                 "address the metrics' port listens on (default: 0.0.0.0)");
  app.add_option("--log-level", options.log_level,
                 "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  app.add_option("--hwloc-xml", options.hwloc_xml,
                 "read the node's layout (NUMA nodes, cores, GPUs, NICs) from this hwloc XML "
                 "file instead of this machine (lstopo-no-graphics --of xml FILE); for tests and "
                 "emulation");
  app.add_flag("--print-node", options.print_node,
               "print this node as a cohort.conf NodeName line (CPUs, Sockets, CoresPerSocket, "
               "ThreadsPerCore, MemoryMB, Gpus, GpuNuma), then its NUMA nodes, GPUs and NICs, "
               "and exit; needs no controller or key")
      ->excludes(emulate);
  app.add_flag("--fake-exec", options.fake_exec,
               "with --emulate: start no process; each launch's ranks \"run\" for the time the "
               "job says (COHORT_FAKE_RUNTIME=SECONDS in its environment, else `sleep S`; "
               "`false` exits 1; anything else exits 0 at once) on a timer, and end by a signal "
               "when cancelled; for scale tests and benchmarks")
      ->needs(emulate);
}

absl::StatusOr<AgentSettings> ResolveSettings(const AgentOptions& options) {
  // Mistakes on the command line first: they are the cheapest to fix.
  absl::StatusOr<std::vector<std::string>> names = NodeNames(options);
  if (!names.ok()) return names.status();
  AgentSettings settings;
  if (!options.controller.empty()) {
    absl::StatusOr<std::vector<std::string>> targets =
        config::ParseControllerList(options.controller, 0, "--controller");
    if (!targets.ok()) return targets.status();
    settings.controller_targets = *std::move(targets);
  }

  absl::StatusOr<config::ClusterConfig> config = LoadConfig(options.config_file);
  if (!config.ok()) return config.status();
  if (settings.controller_targets.empty()) {
    settings.controller_targets = config::ControllerTargets(*config);
  }

  settings.tls = config->TlsOn();
  if (settings.tls && !config->tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = shell::ReadPem(config->tls_ca_file, "TLSCAFile");
    if (!ca.ok()) return ca.status();
    settings.tls_ca_pem = *std::move(ca);
  }
  if (settings.tls && !config->agent_cert_file.empty()) {
    absl::StatusOr<std::string> cert = shell::ReadPem(config->agent_cert_file, "AgentCertFile");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = shell::ReadPem(config->agent_key_file, "AgentKeyFile");
    if (!key.ok()) return key.status();
    settings.agent_cert_pem = *std::move(cert);
    settings.agent_key_pem = *std::move(key);
  }
  settings.munge_socket = config->munge_socket;
  settings.auth_type = config->auth_type;
  if (settings.auth_type == config::AuthType::kAuto) {
    settings.auth_type =
        shell::EncodeMungeCredential(settings.munge_socket, shell::kMungeClientPayload).ok()
            ? config::AuthType::kMunge
            : config::AuthType::kNone;
  }
  // An agent with a client certificate proves itself by it: no key.
  if (settings.auth_type == config::AuthType::kNone && settings.agent_cert_pem.empty()) {
    const bool key_from_flag = !options.auth_key_file.empty();
    const std::string key_path = key_from_flag ? options.auth_key_file : config->auth_key_file;
    absl::StatusOr<std::string> key = ReadAuthKey(
        key_path, key_from_flag                  ? "--auth-key-file"
                  : !options.config_file.empty() ? "AuthKeyFile of " + options.config_file
                                                 : "default path");
    if (!key.ok()) return key.status();
    settings.auth_key = *std::move(key);
  }
  settings.cluster_name = config->cluster_name;
  settings.health_program = config->health_check_program;
  settings.health_interval = config->health_check_interval;
  settings.gather_interval = config->job_acct_gather_frequency;
  settings.prolog = config->prolog;
  settings.epilog = config->epilog;
  settings.script_timeout = config->prolog_epilog_timeout;
  settings.container_images = {
      .cache_dir = config->container_cache_dir,
      .cache_max_bytes = static_cast<std::int64_t>(config->container_cache_max_gb) << 30,
      .registry_ca_file = config->container_registry_ca_file,
      .credentials_file = config->container_credentials_file,
      .registry_mirrors = config->container_registry_mirrors};
  settings.container_hooks_dir = config->container_hooks_dir;
  if (config->switch_type == "nvidia_imex") {
    settings.imex_channel_dir = config->imex.channel_dir;
    settings.imex_dev_major = config->imex.dev_major;
  }
  settings.http_port = options.http_port;
  settings.http_port_file = options.http_port_file;
  settings.http_address = options.http_address;
  settings.spool_dir = options.spool_dir.empty() ? fmt::format("/tmp/cohort-agent-{}", ::getuid())
                                                 : options.spool_dir;
  {
    // Absolute: the stepds and cohort-image run elsewhere.
    std::error_code error;
    const std::filesystem::path spool = std::filesystem::absolute(settings.spool_dir, error);
    if (!error) settings.spool_dir = spool.lexically_normal().string();
    while (settings.spool_dir.size() > 1 && settings.spool_dir.ends_with('/')) {
      settings.spool_dir.pop_back();
    }
  }
  if (settings.container_images.cache_dir.empty()) {
    settings.container_images.cache_dir = settings.spool_dir + "/images";
  }

  std::string xml;
  absl::StatusOr<layout::NodeLayout> host = HostLayout(options, settings.warnings, &xml);
  if (!host.ok()) return host.status();
  // The stepds of emulated nodes run on this machine too.
  settings.host_topology_xml = std::move(xml);
  if (options.emulate == 0) {
    settings.mode = NodeMode::kReal;
    const config::NodeSpec* spec = FindNode(*config, names->front());
    UseConfiguredGpus(*host, spec);
    NodeResources resources = ResourcesFromLayout(*host);
    // NVIDIA GPUs: which NVLink domain they are in, from the driver.
    const bool nvidia = std::any_of(host->gpus.begin(), host->gpus.end(),
                                    [](const layout::Gpu& gpu) { return !gpu.amd; });
    if (nvidia || std::getenv("COHORT_NVML_LIBRARY") != nullptr) {
      absl::StatusOr<std::vector<GpuFabric>> fabrics = ReadGpuFabrics(NvmlLibrary());
      if (fabrics.ok()) {
        resources.nvlink_domain = NvlinkDomainOf(*fabrics);
      } else if (!absl::IsNotFound(fabrics.status()) ||
                 std::getenv("COHORT_NVML_LIBRARY") != nullptr) {
        settings.warnings.push_back(fmt::format("nvlink_domain_unknown reason={:?}",
                                                std::string(fabrics.status().message())));
      }
    }
    NodeSetup& setup = settings.nodes.emplace_back(
        MakeSetup(names->front(), std::move(resources), *std::move(host), options));
    setup.gpu_files = spec != nullptr && !spec->gpu_files.empty() ? spec->gpu_files
                                                                  : DefaultGpuFiles(setup.layout);
    return settings;
  }

  settings.mode = NodeMode::kEmulated;
  settings.fake_exec = options.fake_exec;
  std::map<std::string_view, const config::NodeSpec*> declared;
  for (const config::NodeSpec& spec : config->nodes) declared.emplace(spec.name, &spec);
  std::vector<std::string> undeclared;
  for (std::string& name : *names) {
    const auto it = declared.find(name);
    if (it == declared.end()) {
      undeclared.push_back(name);
      settings.nodes.push_back(
          MakeSetup(std::move(name), ResourcesFromLayout(*host), *host, options));
      continue;
    }
    const config::NodeSpec& spec = *it->second;
    NodeResources resources{spec.cpus, spec.memory_mb, spec.gpus, {}, {}};
    layout::NodeLayout node =
        options.hwloc_xml.empty()
            ? layout::ApproximateLayout(spec.cpus, spec.memory_mb, spec.gpus, spec.gpu_numa)
            : *host;
    settings.nodes.push_back(
        MakeSetup(std::move(name), std::move(resources), std::move(node), options));
    settings.nodes.back().gpu_files = spec.gpu_files;
  }
  if (!undeclared.empty()) {
    settings.warnings.push_back(
        fmt::format("emulated_nodes_undeclared nodes={} config={} using=host_resources",
                    hostlist::Compress(undeclared),
                    options.config_file.empty() ? "none" : options.config_file));
  }
  return settings;
}

absl::StatusOr<std::string> DescribeNode(const AgentOptions& options) {
  absl::StatusOr<std::vector<std::string>> names = NodeNames(options);
  if (!names.ok()) return names.status();
  absl::StatusOr<config::ClusterConfig> config = LoadConfig(options.config_file);
  if (!config.ok()) return config.status();
  std::vector<std::string> warnings;
  absl::StatusOr<layout::NodeLayout> node = HostLayout(options, warnings);
  if (!node.ok()) return node.status();
  UseConfiguredGpus(*node, FindNode(*config, names->front()));

  std::string text = layout::FormatNodeLine(names->front(), *node) + "\n";
  text += options.hwloc_xml.empty() ? "# found by hwloc on this machine\n"
                                    : fmt::format("# read by hwloc from {}\n", options.hwloc_xml);
  for (const std::string& warning : warnings) text += fmt::format("# warning: {}\n", warning);
  const std::string summary = layout::DescribeLayout(*node);
  for (std::size_t start = 0; start < summary.size();) {
    const std::size_t end = summary.find('\n', start);
    text += fmt::format("# {}\n", std::string_view(summary).substr(start, end - start));
    start = end == std::string::npos ? summary.size() : end + 1;
  }
  return text;
}

}  // namespace cohort::agent
