// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/cluster_config.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "cohort/config/controller_addrs.h"
#include "cohort/fmt_absl.h"

#include "cohort/text/hostlist.h"
#include "config/conf_lexer.h"
#include "config/config_tables.h"
#include "config/config_values.h"

namespace cohort::config {
namespace {

// How long an agent takes to notice that its controller's machine vanished
// (its keepalive: 10 s, then 5 s for the answer) before it dials the next.
constexpr std::chrono::seconds kNoticeVanishedController{15};

constexpr int kMaxIncludeDepth = 8;

bool Is(const conf::Word& word, std::string_view key) { return EqualsIgnoreCase(word.key, key); }

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
      } else if (Is(head, "QOSName")) {
        ParseQosLine(line);
      } else if (Is(head, "AccountName")) {
        ParseAccountLine(line);
      } else if (GlobalKeys().Find(head.key) == nullptr) {
        // The rest of a line that starts with an unknown key is its
        // arguments; reporting each of them too would only bury the typo.
        GlobalKeys().ReportUnknown(head, diagnostics_);
      } else {
        ParseGlobalLine(line, file, depth);
      }
    }
  }

  void Finish() {
    ClusterConfig& config = result_.config;
    CheckPartitions(config);
    CheckQos(config);
    std::size_t culprit = 0;
    if (absl::Status tree = CheckAccountTree(config.accounts, &culprit); !tree.ok()) {
      diagnostics_.Error(config.accounts[culprit].defined_at, std::string(tree.message()),
                         "fix the Parent= of the AccountName lines");
    } else if (absl::Status qos = CheckAccountQos(config.accounts, config.qos, &culprit);
               !qos.ok()) {
      diagnostics_.Error(config.accounts[culprit].defined_at, std::string(qos.message()));
    }
    if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
      diagnostics_.Error({}, "TLSCertFile and TLSKeyFile go together",
                         "give both (the controller's certificate and its key), or neither");
    }
    if (config.agent_cert_file.empty() != config.agent_key_file.empty()) {
      diagnostics_.Error({}, "AgentCertFile and AgentKeyFile go together",
                         "give both (an agent's certificate and its key), or neither");
    } else if (!config.agent_cert_file.empty() &&
               (config.tls_cert_file.empty() || config.tls_ca_file.empty())) {
      diagnostics_.Error({}, "AgentCertFile needs TLS with a cluster CA",
                         "set TLSCertFile, TLSKeyFile and TLSCAFile (the CA that signed the "
                         "agents' certificates)");
    }
    if (config.state_backend == "postgresql" && config.state_database.empty()) {
      diagnostics_.Error({}, "StateBackend=postgresql needs StateDatabase=",
                         "name the database as libpq does, such as StateDatabase=\"host=db1 "
                         "dbname=cohort user=cohort\" (docs/operations.md, \"High "
                         "availability\")");
    } else if (config.state_backend == "postgresql" &&
               config.node_timeout < config.controller_timeout + kNoticeVanishedController) {
      // An agent hears no controller from the active one's loss until it
      // reaches the new one; past NodeTimeout it stops its ranks.
      diagnostics_.Warning(
          {},
          fmt::format("NodeTimeout={} is shorter than a takeover can take: ControllerTimeout={} "
                      "and {} s for an agent to notice a vanished controller; agents would stop "
                      "their jobs' ranks before they reach the new active controller",
                      config.node_timeout.count(), config.controller_timeout.count(),
                      kNoticeVanishedController.count()),
          fmt::format("set NodeTimeout={} or more (docs/operations.md, \"High availability\")",
                      (config.controller_timeout + kNoticeVanishedController).count()));
    } else if (config.state_backend != "postgresql" && !config.state_database.empty()) {
      diagnostics_.Warning({}, "StateDatabase= is set but StateBackend is not postgresql",
                           "set StateBackend=postgresql to keep the state there, or remove "
                           "StateDatabase=");
    }
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
  void ParseGlobalLine(const conf::Line& line, std::string_view file, int depth) {
    const auto include = [&](const conf::Word& word) { Include(word, file, depth); };
    GlobalLine state{result_.config, file, include};
    for (const conf::Word& word : line.words) {
      if (const conf::KeyRow<GlobalLine>* row = GlobalKeys().Find(word.key); row != nullptr) {
        // A bad value is reported and the key keeps its value: the config
        // is unusable anyway, and the rest of the file is still checked.
        (void)row->parse(word, state, diagnostics_);
      } else if (IsLineKey(word.key)) {
        diagnostics_.Error(word.key_at, fmt::format("{}= must start its line", word.key),
                           fmt::format("move {}={} to a line of its own", word.key, word.value));
      } else {
        GlobalKeys().ReportUnknown(word, diagnostics_);
      }
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
    NodeLine state{node_defaults_};
    NodeSpec& spec = state.target;
    spec.defined_at = head.key_at;
    bool ok = NodeKeys().ParseWords(line, state, diagnostics_);
    if (ok && state.gres_word != nullptr) {
      if (state.gpus_word != nullptr && spec.gpus != state.gres_gpus) {
        diagnostics_.Error(
            state.gres_word->value_at,
            fmt::format("Gres={} and Gpus={} disagree", state.gres_word->value, spec.gpus),
            "give the GPUs once, with Gres= (or Gpus=)");
        ok = false;
      }
      spec.gpus = state.gres_gpus;
    }
    // Gpus= may come from a DEFAULT line: check the pair on the node's own line.
    if (!is_default && ok && !spec.gpu_numa.empty() &&
        spec.gpu_numa.size() != static_cast<std::size_t>(spec.gpus)) {
      diagnostics_.Error(
          state.gpu_numa_word != nullptr ? state.gpu_numa_word->value_at : head.value_at,
          fmt::format("GpuNuma= lists {} NUMA node{} but the node has Gpus={}",
                      spec.gpu_numa.size(), spec.gpu_numa.size() == 1 ? "" : "s", spec.gpus),
          "give one NUMA node per GPU, in GPU order");
      ok = false;
    }
    if (!is_default && ok && !spec.gpu_files.empty() &&
        spec.gpu_files.size() != static_cast<std::size_t>(spec.gpus)) {
      diagnostics_.Error(
          state.gpu_files_word != nullptr ? state.gpu_files_word->value_at : head.value_at,
          fmt::format("GpuFiles= names {} file{} but the node has Gpus={}", spec.gpu_files.size(),
                      spec.gpu_files.size() == 1 ? "" : "s", spec.gpus),
          "name one device file per GPU, in GPU order: GpuFiles=/dev/nvidia[0-7]");
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
        diagnostics_.Error(
            head.value_at,
            fmt::format("node {} is defined twice (first at line {})", name, first.line),
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
    PartitionLine state{partition_defaults_, defaults_all_nodes_, std::nullopt};
    PartitionSpec& spec = state.target;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    const bool ok = PartitionKeys().ParseWords(line, state, diagnostics_);
    if (state.nodes_at) partition_nodes_at_[spec.name] = *state.nodes_at;
    if (is_default_line) {
      partition_defaults_ = spec;
      defaults_all_nodes_ = state.all_nodes;
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
                           fmt::format("partition {} is defined twice (first at line {})",
                                       spec.name, other.defined_at.line),
                           "merge the two PartitionName lines");
        return;
      }
    }
    partition_all_[spec.name] = state.all_nodes;
    result_.config.partitions.push_back(std::move(spec));
  }

  void ParseQosLine(const conf::Line& line) {
    const conf::Word& head = line.words.front();
    const bool is_default_line = EqualsIgnoreCase(head.value, "DEFAULT");
    QosLine state{qos_defaults_, is_default_line ? head.value_at : qos_default_preempt_at_};
    QosSpec& spec = state.target;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    const bool ok = QosKeys().ParseWords(line, state, diagnostics_);
    if (is_default_line) {
      qos_defaults_ = spec;
      qos_default_preempt_at_ = state.preempt_at;
      return;
    }
    if (spec.name.empty()) {
      diagnostics_.Error(head.value_at, "QOS without a name", "write QOSName=<name>");
      return;
    }
    if (!ok) return;
    for (const QosSpec& other : result_.config.qos) {
      if (other.name == spec.name) {
        diagnostics_.Error(head.value_at,
                           fmt::format("QOS {} is defined twice (first at line {})", spec.name,
                                       other.defined_at.line),
                           "merge the two QOSName lines");
        return;
      }
    }
    qos_preempt_at_[spec.name] = state.preempt_at;
    result_.config.qos.push_back(std::move(spec));
  }

  void ParseAccountLine(const conf::Line& line) {
    const conf::Word& head = line.words.front();
    if (EqualsIgnoreCase(head.value, "DEFAULT")) {
      diagnostics_.Error(head.value_at, "AccountName=DEFAULT is not supported",
                         "an account without an AccountName line has Shares=1; give each account "
                         "its own line");
      return;
    }
    if (head.value.empty()) {
      diagnostics_.Error(head.value_at, "account without a name", "write AccountName=<name>");
      return;
    }
    AccountLine state;
    AccountSpec& spec = state.target;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    if (!AccountKeys().ParseWords(line, state, diagnostics_)) return;
    if (spec.parent == "root") spec.parent.clear();
    for (const AccountSpec& other : result_.config.accounts) {
      if (other.name == spec.name) {
        diagnostics_.Error(head.value_at,
                           fmt::format("account {} is defined twice (first at line {})", spec.name,
                                       other.defined_at.line),
                           "merge the two AccountName lines");
        return;
      }
    }
    result_.config.accounts.push_back(std::move(spec));
  }

  // Preempt= may name declared QOS and the DefaultQOS, which exists even
  // undeclared; the implicit DefaultQOS entry is added after the check.
  void CheckQos(ClusterConfig& config) {
    std::vector<std::string> known;
    for (const QosSpec& qos : config.qos) known.push_back(qos.name);
    const bool default_declared =
        std::find(known.begin(), known.end(), config.default_qos) != known.end();
    if (!default_declared) known.push_back(config.default_qos);
    for (const QosSpec& qos : config.qos) {
      const SourceLocation& at = qos_preempt_at_[qos.name];
      for (const std::string& victim : qos.preempt) {
        if (victim == qos.name) {
          diagnostics_.Error(at, fmt::format("QOS {} lists itself in Preempt=", qos.name),
                             fmt::format("a QOS cannot preempt its own jobs; remove {} from "
                                         "Preempt=",
                                         qos.name));
        } else if (std::find(known.begin(), known.end(), victim) == known.end()) {
          diagnostics_.Error(at, fmt::format("QOS {} may preempt unknown QOS {}", qos.name, victim),
                             fmt::format("known QOS: {}; declare it with QOSName={}",
                                         fmt::join(known, ", "), victim));
        }
      }
    }
    if (!default_declared) {
      QosSpec implicit;
      implicit.name = config.default_qos;
      config.qos.push_back(std::move(implicit));
    }
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
  QosSpec qos_defaults_;                                  ///< QOSName=DEFAULT
  SourceLocation qos_default_preempt_at_;                 ///< where qos_defaults_.preempt was set
  std::map<std::string, SourceLocation> qos_preempt_at_;  ///< Preempt= of each QOS
  bool defaults_all_nodes_ = false;                       ///< PartitionName=DEFAULT Nodes=ALL
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

const QosSpec* ClusterConfig::FindQos(std::string_view name) const {
  for (const QosSpec& q : qos) {
    if (q.name == name) return &q;
  }
  // ParseClusterConfig appends the DefaultQOS entry, so a parsed config never
  // gets here for it; a config built in code without one gets the same
  // values (Priority=0, no limits) from a shared entry with an empty name.
  static const QosSpec kImplicitDefault;
  return name == default_qos ? &kImplicitDefault : nullptr;
}

const AccountSpec* ClusterConfig::FindAccount(std::string_view name) const {
  for (const AccountSpec& a : accounts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<const AccountSpec*> ClusterConfig::AccountChain(std::string_view name) const {
  std::vector<const AccountSpec*> chain;
  // Bounded by the number of accounts: a loop (refused when made) cannot
  // make it run forever.
  for (const AccountSpec* at = FindAccount(name); at != nullptr && chain.size() <= accounts.size();
       at = at->parent.empty() ? nullptr : FindAccount(at->parent)) {
    chain.push_back(at);
  }
  return chain;
}

absl::Status CheckAccountTree(const std::vector<AccountSpec>& accounts, std::size_t* culprit) {
  std::map<std::string_view, const AccountSpec*> by_name;
  for (const AccountSpec& account : accounts) {
    if (culprit != nullptr) *culprit = static_cast<std::size_t>(&account - accounts.data());
    if (account.name.empty() || account.name == "root") {
      return absl::InvalidArgumentError(
          fmt::format("account \"{}\": {}", account.name,
                      account.name.empty() ? "an account needs a name"
                                           : "root is the top of the tree, above every account; "
                                             "name the account otherwise"));
    }
    if (!by_name.emplace(account.name, &account).second) {
      return absl::AlreadyExistsError(fmt::format("account {} is defined twice", account.name));
    }
  }
  for (const AccountSpec& account : accounts) {
    if (culprit != nullptr) *culprit = static_cast<std::size_t>(&account - accounts.data());
    if (account.parent.empty()) continue;
    if (!by_name.contains(account.parent)) {
      return absl::InvalidArgumentError(
          fmt::format("account {}: its parent {} is no account; add that account first, or write "
                      "Parent=root",
                      account.name, account.parent));
    }
    std::vector<std::string_view> path{account.name};
    for (const AccountSpec* up = by_name.at(account.parent);;) {
      path.push_back(up->name);
      if (up->name == account.name) {
        return absl::InvalidArgumentError(
            fmt::format("account {} would be under itself ({}); give one of them another parent",
                        account.name, fmt::join(path, " under ")));
      }
      if (up->parent.empty() || path.size() > accounts.size() + 1) break;
      up = by_name.at(up->parent);
    }
  }
  return absl::OkStatus();
}

namespace {

// The QOS list in force for an association whose own is `own`: the nearest
// one set up the tree from `account`.
const std::vector<std::string>& ListInForce(
    const std::vector<std::string>& own, const AccountSpec* account,
    const std::map<std::string_view, const AccountSpec*>& by_name) {
  if (!own.empty()) return own;
  for (std::size_t steps = 0; account != nullptr && steps <= by_name.size(); ++steps) {
    if (!account->limits.qos.empty()) return account->limits.qos;
    const auto up = by_name.find(account->parent);
    account = up == by_name.end() ? nullptr : up->second;
  }
  return own;
}

}  // namespace

absl::Status CheckAccountQos(const std::vector<AccountSpec>& accounts,
                             const std::vector<QosSpec>& qos, std::size_t* culprit) {
  std::map<std::string_view, const AccountSpec*> by_name;
  for (const AccountSpec& account : accounts) by_name.emplace(account.name, &account);
  const auto known = [&](const std::string& name) {
    return std::any_of(qos.begin(), qos.end(), [&](const QosSpec& q) { return q.name == name; });
  };
  const auto check = [&](const AssocLimits& limits, const AccountSpec& account,
                         const std::string& who) -> absl::Status {
    std::vector<std::string> names = limits.qos;
    if (!limits.default_qos.empty()) names.push_back(limits.default_qos);
    for (const std::string& name : names) {
      if (known(name)) continue;
      std::vector<std::string_view> all;
      for (const QosSpec& q : qos) all.push_back(q.name);
      return absl::InvalidArgumentError(
          fmt::format("{}: no QOS {}; QOS are {} (sacctmgr add qos {} makes one)", who, name,
                      fmt::join(all, ","), name));
    }
    if (limits.default_qos.empty()) return absl::OkStatus();
    const AccountSpec* from = limits.qos.empty() ? &account : nullptr;
    const std::vector<std::string>& allowed = ListInForce(limits.qos, from, by_name);
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), limits.default_qos) == allowed.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: DefaultQOS={} is not one of the QOS it may use ({}); add it to QOS= or pick one "
          "of those",
          who, limits.default_qos, fmt::join(allowed, ",")));
    }
    return absl::OkStatus();
  };
  for (const AccountSpec& account : accounts) {
    if (culprit != nullptr) *culprit = static_cast<std::size_t>(&account - accounts.data());
    if (absl::Status s = check(account.limits, account, "account " + account.name); !s.ok()) {
      return s;
    }
    for (const UserAssoc& user : account.user_limits) {
      if (absl::Status s =
              check(user.limits, account, fmt::format("user {} in {}", user.user, account.name));
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

AssocQos QosOf(const ClusterConfig& config, const std::string& account, const std::string& user) {
  AssocLimits limits;
  const AccountSpec* spec = config.FindAccount(account);
  if (spec != nullptr) {
    for (const UserAssoc& assoc : spec->user_limits) {
      if (assoc.user == user) limits = assoc.limits;
    }
  }
  for (const AccountSpec* at : config.AccountChain(account)) {
    if (limits.qos.empty()) limits.qos = at->limits.qos;
    if (limits.default_qos.empty()) limits.default_qos = at->limits.default_qos;
  }
  return {.allowed = std::move(limits.qos), .default_qos = std::move(limits.default_qos)};
}

std::string_view AuthTypeName(AuthType type) {
  switch (type) {
    case AuthType::kAuto:
      return "auto";
    case AuthType::kMunge:
      return "munge";
    case AuthType::kNone:
      return "none";
  }
  return "auto";
}

std::string_view PartitionStateName(PartitionState state) {
  switch (state) {
    case PartitionState::kUp:
      return "UP";
    case PartitionState::kDown:
      return "DOWN";
    case PartitionState::kDrain:
      return "DRAIN";
    case PartitionState::kInactive:
      return "INACTIVE";
  }
  return "UP";
}

std::optional<PartitionState> ParsePartitionStateName(std::string_view name) {
  for (const PartitionState state : {PartitionState::kUp, PartitionState::kDown,
                                     PartitionState::kDrain, PartitionState::kInactive}) {
    if (EqualsIgnoreCase(name, PartitionStateName(state))) return state;
  }
  return std::nullopt;
}

std::string_view PreemptModeName(PreemptMode mode) {
  switch (mode) {
    case PreemptMode::kOff:
      return "OFF";
    case PreemptMode::kRequeue:
      return "REQUEUE";
    case PreemptMode::kCancel:
      return "CANCEL";
    case PreemptMode::kSuspend:
      return "SUSPEND";
  }
  return "OFF";
}

ConfigResult ParseClusterConfig(std::string_view text, std::string_view file,
                                const FileLoader& loader) {
  ConfigResult result;
  Parser parser(loader, result);
  parser.ParseFile(text, file, 0);
  parser.Finish();
  return result;
}

namespace {

void ReadClientSettingsOf(std::string_view text, std::string_view file, const FileLoader& loader,
                          std::vector<std::string>& including, ClientSettings& out,
                          ClusterConfig& addresses) {
  Diagnostics ignored;
  for (const conf::Line& line : conf::Lex(text, file, ignored)) {
    // A node, partition, QOS or account line holds no global key, nor does
    // a line that starts with an unknown key.
    const conf::Word& head = line.words.front();
    if (IsLineKey(head.key) || GlobalKeys().Find(head.key) == nullptr) continue;
    for (const conf::Word& word : line.words) {
      if (Is(word, "StateDir")) {
        out.state_dir = word.value;
      } else if (Is(word, "AuthKeyFile")) {
        out.auth_key_file = ResolvePath(file, word.value);
      } else if (Is(word, "AuthType")) {
        (void)ParseAuthType(word, out.auth_type, ignored);
      } else if (Is(word, "AuthInfo")) {
        (void)ParseAuthInfo(word, out.munge_socket, ignored);
      } else if (Is(word, "TLSCertFile")) {
        out.tls = !word.value.empty();
      } else if (Is(word, "TLSCAFile")) {
        out.tls_ca_file = ResolvePath(file, word.value);
      } else if (Is(word, "ControllerAddr")) {
        (void)ParseControllerAddr(word, addresses, ignored);
      } else if (Is(word, "ControllerPort")) {
        (void)ParsePort(word, addresses.controller_port, ignored);
      } else if (Is(word, "Include") &&
                 including.size() <= static_cast<std::size_t>(kMaxIncludeDepth)) {
        const std::string path = ResolvePath(file, word.value);
        if (std::find(including.begin(), including.end(), path) != including.end()) continue;
        const absl::StatusOr<std::string> included = loader(path);
        if (!included.ok()) continue;
        including.push_back(path);
        ReadClientSettingsOf(*included, path, loader, including, out, addresses);
        including.pop_back();
      }
    }
  }
}

}  // namespace

ClientSettings ReadClientSettings(std::string_view text, std::string_view file,
                                  const FileLoader& loader) {
  const ClusterConfig defaults;
  ClientSettings out{defaults.state_dir,
                     defaults.auth_key_file,
                     defaults.auth_type,
                     defaults.munge_socket,
                     defaults.TlsOn(),
                     defaults.tls_ca_file,
                     {}};
  std::vector<std::string> including{std::string(file)};
  ClusterConfig addresses;  // ControllerAddr= and ControllerPort= only
  ReadClientSettingsOf(text, file, loader, including, out, addresses);
  out.controllers = ControllerTargets(addresses);
  return out;
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
