// SPDX-License-Identifier: Apache-2.0
#include "cohort/cluster_config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "cohort/hostlist.h"
#include "conf_lexer.h"

namespace cohort::config {
namespace {

constexpr std::array<std::string_view, 13> kGlobalKeys = {
    "ClusterName", "ControllerAddr", "ControllerPort", "StateDir",    "AuthKeyFile",
    "TopologyFile", "NodeTimeout",   "KillWait",       "StateSync",   "HistoryDays",
    "Include",      "NodeName",      "PartitionName"};
constexpr std::array<std::string_view, 10> kNodeKeys = {
    "CPUs",     "MemoryMB", "RealMemory",     "Gpus",           "GpuNuma",
    "Features", "Sockets",  "CoresPerSocket", "ThreadsPerCore", "NodeName"};
constexpr int kMaxNumaNode = 1023;  // Linux's MAX_NUMNODES is at most 1024
constexpr std::array<std::string_view, 8> kPartitionKeys = {
    "Nodes",        "Default",       "MaxTime",       "DefaultTime",
    "MaxNodes",     "PriorityTier",  "AllowAccounts", "PartitionName"};
constexpr int kMaxIncludeDepth = 8;

bool Is(const conf::Word& word, std::string_view key) { return EqualsIgnoreCase(word.key, key); }

bool IsGlobalKey(const conf::Word& word) {
  return std::any_of(kGlobalKeys.begin(), kGlobalKeys.end(),
                     [&](std::string_view key) { return Is(word, key); });
}

// Resolves `path` against the folder of `from`, as Slurm resolves Include.
std::string ResolvePath(std::string_view from, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || from.empty()) return path;
  return (std::filesystem::path(from).parent_path() / p).lexically_normal().string();
}

// GpuNuma=0,0,1,1: the NUMA node of each GPU, by GPU index. Reports the
// first item that is not a NUMA node number, at its column.
bool ParseGpuNuma(const conf::Word& word, std::vector<int>& out, Diagnostics& diagnostics) {
  out.clear();
  const std::string_view value = word.value;
  if (value.empty()) return true;  // unknown, as without the key (overrides a DEFAULT line)
  for (std::size_t start = 0;;) {
    const std::size_t comma = value.find(',', start);
    const std::string_view item =
        value.substr(start, comma == std::string_view::npos ? comma : comma - start);
    int numa = -1;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), numa);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || numa < 0 ||
        numa > kMaxNumaNode) {
      SourceLocation at = word.value_at;
      at.column += static_cast<int>(start);
      diagnostics.Error(at,
                        fmt::format("GpuNuma: \"{}\" is not a NUMA node number from 0 to {}", item,
                                    kMaxNumaNode),
                        "list the NUMA node of each GPU in GPU order, as `cohort-agent "
                        "--print-node` prints it: GpuNuma=0,0,0,0,1,1,1,1");
      return false;
    }
    out.push_back(numa);
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

struct NodeLine {
  std::vector<std::string> names;
  NodeSpec spec;
};

class Parser {
 public:
  Parser(const FileLoader& loader, ConfigResult& result)
      : loader_(loader), result_(result), diagnostics_(result.diagnostics) {}

  void ParseFile(std::string_view text, std::string_view file, int depth) {
    if (include_stack_.empty()) include_stack_.emplace_back(file);
    for (const conf::Line& line : conf::Lex(text, file, diagnostics_)) {
      const conf::Word& head = line.words.front();
      if (Is(head, "NodeName")) {
        ParseNodeLine(line);
      } else if (Is(head, "PartitionName")) {
        saw_partition_line_ = true;
        ParsePartitionLine(line);
      } else if (!IsGlobalKey(head)) {
        // The rest of a line that starts with an unknown key is its
        // arguments; reporting each of them too would only bury the typo.
        conf::ReportUnknownKey(head, "in cohort.conf", kGlobalKeys, diagnostics_);
      } else {
        for (const conf::Word& word : line.words) ParseGlobal(word, file, depth);
      }
    }
  }

  void Finish() {
    ClusterConfig& config = result_.config;
    CheckPartitions(config);
    if (config.nodes.empty()) {
      diagnostics_.Error({}, "no nodes are defined",
                         "add a line such as NodeName=gpu[001-004] CPUs=64 Gpus=8 MemoryMB=512000");
    }
    if (!saw_partition_line_ && !config.nodes.empty()) {
      // Without partitions no job could be submitted; Slurm refuses, we
      // follow the principle of least surprise and put every node in one.
      PartitionSpec all;
      all.name = "all";
      all.is_default = true;
      for (const NodeSpec& node : config.nodes) all.nodes.push_back(node.name);
      config.partitions.push_back(std::move(all));
      diagnostics_.Warning({}, "no PartitionName line: every node is in partition \"all\"",
                           "add PartitionName=<name> Nodes=ALL Default=YES to name it");
    }
  }

 private:
  void ParseGlobal(const conf::Word& word, std::string_view file, int depth) {
    ClusterConfig& config = result_.config;
    long long number = 0;
    if (Is(word, "ClusterName")) {
      config.cluster_name = word.value;
    } else if (Is(word, "ControllerAddr")) {
      config.controller_addr = word.value;
    } else if (Is(word, "ControllerPort")) {
      if (conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_)) {
        if (number > 65535) {
          diagnostics_.Error(word.value_at, fmt::format("ControllerPort {} is not a TCP port", number),
                             "use a port between 1 and 65535, or 0 for any free port");
        } else {
          config.controller_port = static_cast<int>(number);
        }
      }
    } else if (Is(word, "StateDir")) {
      config.state_dir = word.value;
    } else if (Is(word, "AuthKeyFile")) {
      config.auth_key_file = ResolvePath(file, word.value);
    } else if (Is(word, "TopologyFile")) {
      config.topology_file = ResolvePath(file, word.value);
    } else if (Is(word, "NodeTimeout")) {
      if (conf::ParseInt(word, conf::ZeroPolicy::kPositiveOnly, number, diagnostics_)) {
        config.node_timeout = std::chrono::seconds(number);
      }
    } else if (Is(word, "KillWait")) {
      if (conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_)) {
        config.kill_wait = std::chrono::seconds(number);
      }
    } else if (Is(word, "StateSync")) {
      if (EqualsIgnoreCase(word.value, "full") || EqualsIgnoreCase(word.value, "normal") ||
          EqualsIgnoreCase(word.value, "off")) {
        config.state_sync = word.value;
        std::transform(config.state_sync.begin(), config.state_sync.end(), config.state_sync.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      } else {
        diagnostics_.Error(word.value_at, fmt::format("StateSync={} is not full, normal or off", word.value),
                           "use StateSync=full (safest), normal or off; see docs/operations.md");
      }
    } else if (Is(word, "HistoryDays")) {
      if (conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_)) {
        config.history_days = static_cast<int>(std::min<long long>(number, 100000));
      }
    } else if (Is(word, "Include")) {
      Include(word, file, depth);
    } else if (Is(word, "NodeName") || Is(word, "PartitionName")) {
      diagnostics_.Error(word.key_at, fmt::format("{}= must start its line", word.key),
                         fmt::format("move {}={} to a line of its own", word.key, word.value));
    } else {
      conf::ReportUnknownKey(word, "in cohort.conf", kGlobalKeys, diagnostics_);
    }
  }

  void Include(const conf::Word& word, std::string_view file, int depth) {
    if (depth >= kMaxIncludeDepth) {
      diagnostics_.Error(word.value_at,
                         fmt::format("includes nest deeper than {} files", kMaxIncludeDepth),
                         "check for a file that includes itself");
      return;
    }
    const std::string path = ResolvePath(file, word.value);
    if (std::find(include_stack_.begin(), include_stack_.end(), path) != include_stack_.end()) {
      diagnostics_.Error(word.value_at, fmt::format("\"{}\" includes itself", path),
                         "remove this Include= line, or the one that leads back here");
      return;
    }
    absl::StatusOr<std::string> text = loader_(path);
    if (!text.ok()) {
      diagnostics_.Error(word.value_at,
                         fmt::format("cannot include \"{}\": {}", path, text.status().message()),
                         "paths are relative to the including file");
      return;
    }
    include_stack_.push_back(path);
    ParseFile(*text, path, depth + 1);
    include_stack_.pop_back();
  }

  void ParseNodeLine(const conf::Line& line) {
    const conf::Word& head = line.words.front();
    const bool is_default = EqualsIgnoreCase(head.value, "DEFAULT");
    NodeSpec spec = node_defaults_;
    spec.defined_at = head.key_at;
    bool ok = true;
    long long number = 0;
    const conf::Word* gpu_numa_word = nullptr;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const conf::Word& word = line.words[i];
      if (Is(word, "CPUs")) {
        ok &= conf::ParseInt(word, conf::ZeroPolicy::kPositiveOnly, number, diagnostics_);
        spec.cpus = static_cast<int>(number);
      } else if (Is(word, "MemoryMB") || Is(word, "RealMemory")) {
        ok &= conf::ParseInt(word, conf::ZeroPolicy::kPositiveOnly, number, diagnostics_);
        spec.memory_mb = number;
      } else if (Is(word, "Gpus")) {
        if (!conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_)) {
          ok = false;
        } else if (number > 64) {
          diagnostics_.Error(word.value_at, fmt::format("Gpus={} is more than 64 per node", number),
                             "a node holds at most 64 GPUs");
          ok = false;
        }
        spec.gpus = static_cast<int>(number);
      } else if (Is(word, "GpuNuma")) {
        ok &= ParseGpuNuma(word, spec.gpu_numa, diagnostics_);
        gpu_numa_word = &word;
      } else if (Is(word, "Sockets") || Is(word, "CoresPerSocket") ||
                 Is(word, "ThreadsPerCore")) {
        ok &= conf::ParseInt(word, conf::ZeroPolicy::kPositiveOnly, number, diagnostics_);
        const int value = static_cast<int>(std::min<long long>(number, 1 << 20));
        if (Is(word, "Sockets")) {
          spec.sockets = value;
        } else if (Is(word, "CoresPerSocket")) {
          spec.cores_per_socket = value;
        } else {
          spec.threads_per_core = value;
        }
      } else if (Is(word, "Features")) {
        spec.features = conf::SplitCommas(word.value);
      } else {
        conf::ReportUnknownKey(word, "in a NodeName line", kNodeKeys, diagnostics_);
        ok = false;
      }
    }
    // Gpus= may come from a DEFAULT line: check the pair on the node's own line.
    if (!is_default && ok && !spec.gpu_numa.empty() &&
        spec.gpu_numa.size() != static_cast<std::size_t>(spec.gpus)) {
      diagnostics_.Error(gpu_numa_word != nullptr ? gpu_numa_word->value_at : head.value_at,
                         fmt::format("GpuNuma= lists {} NUMA node{} but the node has Gpus={}",
                                     spec.gpu_numa.size(), spec.gpu_numa.size() == 1 ? "" : "s",
                                     spec.gpus),
                         "give one NUMA node per GPU, in GPU order");
      ok = false;
    }
    if (is_default) {
      node_defaults_ = spec;
      return;
    }
    std::vector<std::string> names;
    if (!conf::ExpandHostlistValue(head, names, diagnostics_) || !ok) return;
    for (std::string& name : names) {
      auto [it, inserted] = node_index_.emplace(name, result_.config.nodes.size());
      if (!inserted) {
        const SourceLocation& first = result_.config.nodes[it->second].defined_at;
        diagnostics_.Error(head.value_at,
                           fmt::format("node {} is defined twice (first at line {})", name,
                                       first.line),
                           "each node belongs in exactly one NodeName line");
        continue;
      }
      NodeSpec node = spec;
      node.name = std::move(name);
      result_.config.nodes.push_back(std::move(node));
    }
  }

  void ParsePartitionLine(const conf::Line& line) {
    const conf::Word& head = line.words.front();
    const bool is_default_line = EqualsIgnoreCase(head.value, "DEFAULT");
    PartitionSpec spec = partition_defaults_;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    bool all_nodes = defaults_all_nodes_;
    long long number = 0;
    bool ok = true;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const conf::Word& word = line.words[i];
      if (Is(word, "Nodes")) {
        if (EqualsIgnoreCase(word.value, "ALL")) {
          all_nodes = true;
          spec.nodes.clear();
        } else {
          all_nodes = false;
          std::vector<std::string> names;
          if (conf::ExpandHostlistValue(word, names, diagnostics_)) {
            spec.nodes = std::move(names);
            partition_nodes_at_[spec.name] = word.value_at;
          } else {
            ok = false;
          }
        }
      } else if (Is(word, "Default")) {
        ok &= conf::ParseYesNo(word, spec.is_default, diagnostics_);
      } else if (Is(word, "MaxTime") || Is(word, "DefaultTime")) {
        absl::StatusOr<std::chrono::seconds> limit = ParseSlurmTime(word.value);
        if (!limit.ok()) {
          diagnostics_.Error(word.value_at, fmt::format("{}: {}", word.key, limit.status().message()),
                             fmt::format("for example {}=2-00:00:00", word.key));
          ok = false;
        } else if (Is(word, "MaxTime")) {
          spec.max_time = *limit;
        } else {
          spec.default_time = *limit;
        }
      } else if (Is(word, "MaxNodes")) {
        if (EqualsIgnoreCase(word.value, "UNLIMITED")) {
          spec.max_nodes.reset();
        } else if (conf::ParseInt(word, conf::ZeroPolicy::kPositiveOnly, number, diagnostics_)) {
          spec.max_nodes = static_cast<int>(number);
        } else {
          ok = false;
        }
      } else if (Is(word, "PriorityTier")) {
        ok &= conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_);
        spec.priority_tier = static_cast<int>(number);
      } else if (Is(word, "AllowAccounts")) {
        spec.allow_accounts.clear();
        if (!EqualsIgnoreCase(word.value, "ALL")) spec.allow_accounts = conf::SplitCommas(word.value);
      } else {
        conf::ReportUnknownKey(word, "in a PartitionName line", kPartitionKeys, diagnostics_);
        ok = false;
      }
    }
    if (is_default_line) {
      partition_defaults_ = spec;
      defaults_all_nodes_ = all_nodes;
      return;
    }
    if (spec.name.empty()) {
      diagnostics_.Error(head.value_at, "partition without a name", "write PartitionName=<name>");
      return;
    }
    if (!ok) return;
    for (const PartitionSpec& other : result_.config.partitions) {
      if (other.name == spec.name) {
        diagnostics_.Error(head.value_at,
                           fmt::format("partition {} is defined twice (first at line {})", spec.name,
                                       other.defined_at.line),
                           "merge the two PartitionName lines");
        return;
      }
    }
    partition_all_[spec.name] = all_nodes;
    result_.config.partitions.push_back(std::move(spec));
  }

  void CheckPartitions(ClusterConfig& config) {
    const PartitionSpec* first_default = nullptr;
    for (PartitionSpec& partition : config.partitions) {
      if (partition_all_[partition.name]) {
        partition.nodes.clear();
        for (const NodeSpec& node : config.nodes) partition.nodes.push_back(node.name);
      }
      std::vector<std::string> unknown;
      for (const std::string& name : partition.nodes) {
        if (!node_index_.contains(name)) unknown.push_back(name);
      }
      if (!unknown.empty()) {
        const auto at = partition_nodes_at_.find(partition.name);
        diagnostics_.Error(at != partition_nodes_at_.end() ? at->second : partition.defined_at,
                           fmt::format("partition {} names nodes with no NodeName line: {}",
                                       partition.name, hostlist::Compress(unknown)),
                           "define them with NodeName= or remove them from Nodes=");
      }
      if (partition.nodes.empty() && unknown.empty()) {
        diagnostics_.Error(partition.defined_at,
                           fmt::format("partition {} has no nodes", partition.name),
                           "add Nodes=<hostlist> or Nodes=ALL");
      }
      if (partition.is_default) {
        if (first_default != nullptr) {
          diagnostics_.Error(partition.defined_at,
                             fmt::format("partitions {} and {} are both Default=YES",
                                         first_default->name, partition.name),
                             "only one partition can be the default");
        } else {
          first_default = &partition;
        }
      }
      if (partition.default_time && partition.max_time != kUnlimited &&
          *partition.default_time > partition.max_time) {
        diagnostics_.Error(partition.defined_at,
                           fmt::format("partition {} has DefaultTime {} above its MaxTime {}",
                                       partition.name, FormatSlurmTime(*partition.default_time),
                                       FormatSlurmTime(partition.max_time)),
                           "lower DefaultTime or raise MaxTime");
      }
    }
  }

  const FileLoader& loader_;
  ConfigResult& result_;
  Diagnostics& diagnostics_;
  NodeSpec node_defaults_;
  PartitionSpec partition_defaults_;
  bool defaults_all_nodes_ = false;  ///< PartitionName=DEFAULT Nodes=ALL
  std::map<std::string, std::size_t> node_index_;
  std::map<std::string, bool> partition_all_;
  std::map<std::string, SourceLocation> partition_nodes_at_;
  std::vector<std::string> include_stack_;  ///< files being read, outermost first
  bool saw_partition_line_ = false;
};

}  // namespace

const PartitionSpec* ClusterConfig::DefaultPartition() const {
  for (const PartitionSpec& p : partitions) {
    if (p.is_default) return &p;
  }
  return partitions.empty() ? nullptr : &partitions.front();
}

const PartitionSpec* ClusterConfig::FindPartition(std::string_view name) const {
  for (const PartitionSpec& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

ConfigResult ParseClusterConfig(std::string_view text, std::string_view file,
                                const FileLoader& loader) {
  ConfigResult result;
  Parser parser(loader, result);
  parser.ParseFile(text, file, 0);
  parser.Finish();
  return result;
}

NodeSpec DefaultNodeSpec(std::string name) {
  NodeSpec spec;
  spec.name = std::move(name);
  spec.cpus = 64;
  spec.memory_mb = 512 * 1024;
  spec.gpus = 8;
  return spec;
}

}  // namespace cohort::config
