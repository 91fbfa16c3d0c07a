// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cluster_files.h"
#include "cohort/config/controller_addrs.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"
#include "commands/commands.h"
#include "format/job_format.h"
#include "job_submit_spec.h"
#include "munge_credential.h"
#include "tls_files.h"
#include "transport/controller_client.h"

namespace cohort::cli {

using shell::ClusterPaths;
using shell::LoadCluster;
using shell::LoadedCluster;
using shell::ReportDiagnostics;
namespace {

struct FileOptions {
  std::string config;
  std::string topology;
  bool live = false;       ///< config check --live
  std::string controller;  ///< with --live or --replay: --controller ADDR
  std::string policy;      ///< config check --policy FILE
  int replay = 0;          ///< with --policy: --replay N

  [[nodiscard]] ClusterPaths Paths() const {
    ClusterPaths paths;
    if (!config.empty()) paths.config = config;
    if (!topology.empty()) paths.topology = topology;
    return paths;
  }
};

void AddFileOptions(CLI::App& command, FileOptions& options) {
  command.add_option("-c,--config", options.config, "cohort.conf to read");
  command.add_option("-t,--topology", options.topology,
                     "topology.conf to read (default: the config's TopologyFile=, or topology.conf "
                     "beside it)");
}

// Loads the files the options name and reports what is wrong with them;
// nullopt, with the exit status set, when there is nothing usable.
std::optional<LoadedCluster> Load(const FileOptions& options, std::string_view usage,
                                  int& exit_code) {
  const ClusterPaths paths = options.Paths();
  if (!paths.config && !paths.topology) {
    std::cerr << "cohort: " << usage << '\n';
    exit_code = 2;
    return std::nullopt;
  }
  LoadedCluster loaded = LoadCluster(paths);
  if (!ReportDiagnostics(loaded)) {
    exit_code = 1;
    return std::nullopt;
  }
  return loaded;
}

void PrintSummary(const LoadedCluster& loaded) {
  const topology::Topology& topo = loaded.topology;
  const config::ClusterConfig& config = loaded.config;
  long long gpus = 0;
  long long cpus = 0;
  for (const config::NodeSpec& node : config.nodes) {
    gpus += node.gpus;
    cpus += node.cpus;
  }
  if (!loaded.config_path.empty())
    std::cout << fmt::format("config     {}: ok\n", loaded.config_path);
  if (!loaded.topology_path.empty()) {
    std::cout << fmt::format("topology   {}: ok\n", loaded.topology_path);
  }
  if (!loaded.config_path.empty()) std::cout << fmt::format("cluster    {}\n", config.cluster_name);
  std::cout << fmt::format("nodes      {} ({}), {} GPUs, {} CPUs{}\n", topo.NodeCount(),
                           hostlist::Compress(topo.NodeNames()), gpus, cpus,
                           loaded.default_nodes
                               ? "; default resources (CPUs=64 MemoryMB=524288 Gpus=8 each: no "
                                 "cohort.conf given)"
                               : "");
  if (topo.HasSwitchTree()) {
    std::map<int, int> per_level;
    for (const topology::Switch& s : topo.Switches()) ++per_level[s.level];
    std::vector<std::string> levels;
    for (const auto& [level, count] : per_level) {
      levels.push_back(fmt::format("level {}: {}", level, count));
    }
    std::cout << fmt::format("switches   {} ({}), {} tree{}\n", topo.Switches().size(),
                             fmt::join(levels, ", "), topo.Roots().size(),
                             topo.Roots().size() == 1 ? "" : "s");
  } else {
    std::cout << "switches   none (a flat network)\n";
  }
  if (!topo.Blocks().empty()) {
    std::vector<std::string> names;
    std::map<std::size_t, int> sizes;
    for (const topology::Block& b : topo.Blocks()) {
      names.push_back(b.name);
      ++sizes[b.nodes.size()];
    }
    std::vector<std::string> size_text;
    for (const auto& [size, count] : sizes)
      size_text.push_back(fmt::format("{} x {} nodes", count, size));
    std::cout << fmt::format("blocks     {} ({}): {}\n", topo.Blocks().size(),
                             hostlist::Compress(names), fmt::join(size_text, ", "));
  }
  for (const config::PartitionSpec& p : config.partitions) {
    std::cout << fmt::format(
        "partition  {}{}: {} nodes ({}), MaxTime {}{}, PriorityTier {}\n", p.name,
        &p == config.DefaultPartition() ? " (default)" : "", p.nodes.size(),
        hostlist::Compress(p.nodes), FormatSlurmTime(p.max_time),
        p.max_nodes ? fmt::format(", MaxNodes {}", *p.max_nodes) : "", p.priority_tier);
  }
  if (loaded.config_path.empty()) return;
  const std::vector<std::string> controllers = config::ControllerTargets(config);
  std::cout << fmt::format("controller {}{}\n", fmt::join(controllers, ", "),
                           controllers.size() > 1 ? " (tried in this order)" : "");
  // StateDatabase may hold a password: it is not printed.
  std::cout << (config.state_backend == "postgresql"
                    ? fmt::format("state      postgresql (StateDatabase): one controller active, "
                                  "a standby takes over after {} s (ControllerTimeout)\n",
                                  config.controller_timeout.count())
                    : fmt::format("state      sqlite: {}/state.db, StateSync={}\n",
                                  config.state_dir, config.state_sync));
}

// `config check --live`: what the running controller's nodes report of
// their NVLink fabric (NVML), against its blocks. False when they disagree.
bool CheckLive(const ConnectionOptions& connection, int& exit_code) {
  const int called = CallController(connection, [](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::GetTopologyResponse> live = client.GetTopology(v1::GetTopologyRequest());
    if (!live.ok()) return live.status();
    if (live->nvlink_contradictions().empty()) {
      std::cout << fmt::format(
          "nvlink     {} node{} of the running controller report NVLink domains{}\n",
          live->nvlink_reporting(), live->nvlink_reporting() == 1 ? "" : "s",
          live->nvlink_reporting() == 0 ? " (no NVIDIA fabric, or no node registered yet)"
                                        : "; they agree with the blocks");
      return absl::OkStatus();
    }
    for (const std::string& sentence : live->nvlink_contradictions()) {
      std::cerr << "error: nvlink: " << sentence << '\n';
    }
    return absl::FailedPreconditionError(fmt::format(
        "the NVLink domains {} nodes report disagree with the running controller's blocks in {} "
        "place{}; fix the BlockName lines (or topology.yaml's blocks) and reconfigure",
        live->nvlink_reporting(), live->nvlink_contradictions_size(),
        live->nvlink_contradictions_size() == 1 ? "" : "s"));
  });
  if (called != 0) exit_code = called;
  return called == 0;
}

// How callers prove who they are and whether TLS is on; the TLS files are
// read and checked as the controller will. False after printing errors.
bool CheckSecurity(const config::ClusterConfig& config) {
  const std::string socket = shell::MungeSocketName(config.munge_socket);
  switch (config.auth_type) {
    case config::AuthType::kMunge:
      std::cout << fmt::format("auth       munge (munged at {})\n", socket);
      break;
    case config::AuthType::kNone:
      std::cout << fmt::format("auth       none: TCP users are anonymous; agents show {}\n",
                               config.auth_key_file);
      break;
    case config::AuthType::kAuto:
      std::cout << fmt::format("auth       munge when munged answers at {}, else none\n", socket);
      break;
  }
  if (!config.TlsOn()) {
    std::cout << "tls        off: the TCP port is plain\n";
    return true;
  }
  const shell::TlsReport report = shell::CheckTlsFiles(config);
  for (const std::string& error : report.errors) std::cerr << "error: " << error << '\n';
  if (!report.errors.empty()) return false;
  std::cout << fmt::format("tls        on: {}; clients verify it with {}\n", report.summary,
                           config.tls_ca_file.empty() ? "the system's CAs" : config.tls_ca_file);
  return true;
}

// Loads a submit policy script and says whether it loads; null after
// printing the error.
std::unique_ptr<policy::JobSubmitPolicy> CheckPolicy(const std::string& path) {
  absl::StatusOr<std::unique_ptr<policy::JobSubmitPolicy>> loaded =
      policy::JobSubmitPolicy::Load(path);
  if (!loaded.ok()) {
    std::cerr << "error: policy: " << loaded.status().message() << '\n';
    return nullptr;
  }
  std::cout << fmt::format("policy     {}: ok (slurm_job_submit)\n", path);
  return *std::move(loaded);
}

// What the policy changed of a job, by job_desc's names: `partition: (none)
// -> short`.
std::vector<std::string> Changes(const policy::SubmitFields& a, const policy::SubmitFields& b) {
  std::vector<std::string> out;
  const auto text = [](const std::string& v) { return v.empty() ? std::string("(none)") : v; };
  const auto limit = [](const std::optional<std::int64_t>& m) {
    return !m                                ? std::string("(none)")
           : *m == policy::kUnlimitedMinutes ? std::string("UNLIMITED")
                                             : fmt::format("{} min", *m);
  };
  for (const auto& [name, x, y] :
       {std::tuple{"name", &a.name, &b.name}, std::tuple{"partition", &a.partition, &b.partition},
        std::tuple{"account", &a.account, &b.account}, std::tuple{"qos", &a.qos, &b.qos},
        std::tuple{"comment", &a.comment, &b.comment}, std::tuple{"wckey", &a.wckey, &b.wckey}}) {
    if (*x != *y) out.push_back(fmt::format("{}: {} -> {}", name, text(*x), text(*y)));
  }
  if (a.time_limit_min != b.time_limit_min) {
    out.push_back(
        fmt::format("time_limit: {} -> {}", limit(a.time_limit_min), limit(b.time_limit_min)));
  }
  for (const auto& [name, x, y] :
       {std::tuple{"min_nodes", a.nodes, b.nodes},
        std::tuple{"ntasks_per_node", a.tasks_per_node, b.tasks_per_node},
        std::tuple{"cpus_per_task", a.cpus_per_task, b.cpus_per_task},
        std::tuple{"gpus_per_node", a.gpus_per_node, b.gpus_per_node}}) {
    if (x != y) out.push_back(fmt::format("{}: {} -> {}", name, x, y));
  }
  if (a.memory_mb != b.memory_mb) {
    out.push_back(fmt::format("pn_min_memory: {} -> {}", a.memory_mb, b.memory_mb));
  }
  if (a.features != b.features) {
    out.push_back(fmt::format("features: {} -> {}",
                              text(fmt::format("{}", fmt::join(a.features, ","))),
                              text(fmt::format("{}", fmt::join(b.features, ",")))));
  }
  if (a.requeue != b.requeue) {
    out.push_back(fmt::format("requeue: {} -> {}", a.requeue ? 1 : 0, b.requeue ? 1 : 0));
  }
  return out;
}

// `config check --policy FILE --replay N`: the script over the last N jobs
// to end, as the controller's history keeps them (as they were queued,
// after the policy then in force), each reported changed, refused, failed
// or unchanged, before the script goes live.
void Replay(policy::JobSubmitPolicy& policy, int count, const ConnectionOptions& connection,
            int& exit_code) {
  const int called = CallController(connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListPartitionsResponse> listed =
        client.ListPartitions(v1::ListPartitionsRequest());
    if (!listed.ok()) return listed.status();
    std::vector<policy::PartitionFields> parts;
    for (const v1::Partition& p : listed->partitions()) {
      parts.push_back(
          {.name = p.name(),
           .nodes = p.nodes(),
           .state = p.state().empty() ? "UP" : p.state(),
           .is_default = p.is_default(),
           .max_time_min =
               p.max_time_s() > 0 ? std::optional(policy::MinutesOf(p.max_time_s())) : std::nullopt,
           .default_time_min = p.default_time_s() > 0
                                   ? std::optional(policy::MinutesOf(p.default_time_s()))
                                   : std::nullopt,
           .max_nodes = p.max_nodes()});
    }
    v1::JobHistoryRequest request;
    request.set_all_users(true);
    request.set_limit(count);
    request.set_newest(true);
    absl::StatusOr<v1::JobHistoryResponse> history = client.JobHistory(request);
    if (!history.ok()) return history.status();
    int changed = 0;
    int refused = 0;
    int failed = 0;
    for (const v1::Job& job : history->jobs()) {
      const policy::SubmitFields before =
          policy::SubmitFieldsOf(job.spec(), JobUser(job), job.uid());
      policy::SubmitFields after = before;
      const absl::Status status = policy.Submit(after, parts, job.uid());
      const std::string who = fmt::format("job {} ({})", JobDisplayId(job), JobUser(job));
      if (absl::IsPermissionDenied(status)) {
        ++refused;
        std::cout << fmt::format("{}: refused: {}\n", who, status.message());
      } else if (!status.ok()) {
        ++failed;
        std::cout << fmt::format("{}: the policy failed: {}\n", who, status.message());
      } else if (const std::vector<std::string> changes = Changes(before, after);
                 !changes.empty()) {
        ++changed;
        std::cout << fmt::format("{}: changed: {}\n", who, fmt::join(changes, "; "));
      }
    }
    const int total = history->jobs_size();
    std::cout << fmt::format(
        "replayed   {} job{}: {} unchanged, {} changed, {} refused, {} where the policy failed\n",
        total, total == 1 ? "" : "s", total - changed - refused - failed, changed, refused, failed);
    return absl::OkStatus();
  });
  if (called != 0) exit_code = called;
}

void PrintTree(const topology::Topology& topo, topology::SwitchId s, const std::string& prefix,
               bool last, bool top) {
  const topology::Switch& sw = topo.GetSwitch(s);
  std::string line = top ? "" : prefix + (last ? "└── " : "├── ");
  line += fmt::format("{}  level {}, {} nodes", sw.name, sw.level, sw.node_count);
  if (!sw.nodes.empty()) {
    std::vector<std::string> names;
    for (const topology::NodeId n : sw.nodes) names.push_back(topo.NodeName(n));
    line += fmt::format(": {}", hostlist::Compress(names));
  }
  std::cout << line << '\n';
  const std::string child_prefix = top ? "" : prefix + (last ? "    " : "│   ");
  for (std::size_t i = 0; i < sw.children.size(); ++i) {
    PrintTree(topo, sw.children[i], child_prefix, i + 1 == sw.children.size(), false);
  }
}

}  // namespace

void AddConfigCommands(CLI::App& app, int& exit_code) {
  CLI::App* config = app.add_subcommand("config", "check configuration files");
  config->require_subcommand(1);
  auto options = std::make_shared<FileOptions>();
  CLI::App* check = config->add_subcommand(
      "check",
      "validate cohort.conf and topology.conf and summarise the cluster; exit 1 on errors");
  AddFileOptions(*check, *options);
  check->add_flag("--live", options->live,
                  "also ask the running controller whether the NVLink domains its nodes report "
                  "(NVML) agree with its blocks; exit 1 where they do not");
  check
      ->add_option("--controller", options->controller,
                   "with --live or --replay: the controller (default: $COHORT_CONTROLLER, else "
                   "the config's)")
      ->type_name("ADDR");
  check->add_option("--policy", options->policy,
                    "check a submit policy script (job_submit.lua) before it goes live");
  check
      ->add_option("--replay", options->replay,
                   "with --policy: run it over the last N jobs in the controller's history and "
                   "say what it would have changed or refused")
      ->check(CLI::Range(1, 100'000))
      ->type_name("N");
  check->callback([options, &exit_code] {
    if (options->replay > 0 && options->policy.empty()) {
      std::cerr << "cohort: config check --replay N needs --policy FILE (the script to replay)\n";
      exit_code = 2;
      return;
    }
    if (!options->policy.empty()) {
      std::unique_ptr<policy::JobSubmitPolicy> policy = CheckPolicy(options->policy);
      if (policy == nullptr) {
        exit_code = 1;
        return;
      }
      if (options->replay > 0) {
        Replay(*policy, options->replay, {options->controller, options->config}, exit_code);
      }
      if (options->config.empty() && options->topology.empty() && !options->live) return;
    }
    if (options->live && options->config.empty() && options->topology.empty()) {
      CheckLive({options->controller, ""}, exit_code);
      return;
    }
    const std::optional<LoadedCluster> loaded =
        Load(*options, "config check needs -c cohort.conf, -t topology.conf, both, or --live",
             exit_code);
    if (!loaded) return;
    PrintSummary(*loaded);
    if (!loaded->config_path.empty() && !CheckSecurity(loaded->config)) exit_code = 1;
    if (!loaded->config.job_submit_script.empty() && options->policy.empty() &&
        CheckPolicy(loaded->config.job_submit_script) == nullptr) {
      exit_code = 1;
    }
    if (options->live) CheckLive({options->controller, options->config}, exit_code);
  });
}

void AddTopologyCommands(CLI::App& app, int& exit_code) {
  CLI::App* topology = app.add_subcommand(
      "topology",
      "show the network topology: alone, the live tree from the controller with free, used and "
      "unavailable nodes per switch; `topology show -t FILE` reads a file offline");
  topology->require_subcommand(0, 1);
  AddLiveTopology(*topology, exit_code);
  auto options = std::make_shared<FileOptions>();
  CLI::App* show = topology->add_subcommand(
      "show", "print the switch tree of a topology file with node counts per switch");
  AddFileOptions(*show, *options);
  show->callback([options, &exit_code] {
    const std::optional<LoadedCluster> loaded =
        Load(*options, "topology show needs -t topology.conf (or -c cohort.conf)", exit_code);
    if (!loaded) return;
    const topology::Topology& topo = loaded->topology;
    for (std::size_t i = 0; i < topo.Roots().size(); ++i) {
      if (i > 0) std::cout << '\n';
      PrintTree(topo, topo.Roots()[i], "", true, true);
    }
    if (!topo.Blocks().empty()) {
      std::cout << "\nblocks (NVLink domains)\n";
      for (const topology::Block& b : topo.Blocks()) {
        std::vector<std::string> names;
        for (const topology::NodeId n : b.nodes) names.push_back(topo.NodeName(n));
        std::cout << fmt::format("  {}  {} nodes: {}\n", b.name, b.nodes.size(),
                                 hostlist::Compress(names));
      }
    }
  });
}

}  // namespace cohort::cli
