// SPDX-License-Identifier: Apache-2.0
#include "cohort/cluster_config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "cohort/hostlist.h"
#include "conf_lexer.h"

namespace cohort::config {
namespace {

constexpr std::array<std::string_view, 30> kGlobalKeys = {"ClusterName",
                                                          "ControllerAddr",
                                                          "ControllerPort",
                                                          "StateDir",
                                                          "AuthKeyFile",
                                                          "TopologyFile",
                                                          "NodeTimeout",
                                                          "KillWait",
                                                          "StateSync",
                                                          "HistoryDays",
                                                          "PriorityWeightAge",
                                                          "PriorityWeightFairshare",
                                                          "PriorityWeightJobSize",
                                                          "PriorityWeightPartition",
                                                          "PriorityWeightQOS",
                                                          "PriorityMaxAge",
                                                          "PriorityDecayHalfLife",
                                                          "PriorityFavorSmall",
                                                          "PreemptMode",
                                                          "PreemptGraceTime",
                                                          "PreemptExemptTime",
                                                          "PreemptSignal",
                                                          "BackfillDepth",
                                                          "MaxArraySize",
                                                          "DefaultQOS",
                                                          "Include",
                                                          "NodeName",
                                                          "PartitionName",
                                                          "QOSName",
                                                          "AccountName"};
constexpr std::array<std::string_view, 10> kNodeKeys = {
    "CPUs",     "MemoryMB", "RealMemory",     "Gpus",           "GpuNuma",
    "Features", "Sockets",  "CoresPerSocket", "ThreadsPerCore", "NodeName"};
constexpr int kMaxNumaNode = 1023;  // Linux's MAX_NUMNODES is at most 1024
constexpr std::array<std::string_view, 12> kPartitionKeys = {
    "Nodes",         "Default",    "MaxTime",     "DefaultTime", "MaxNodes",      "PriorityTier",
    "AllowAccounts", "AllowUsers", "PreemptMode", "GraceTime",   "PreemptSignal", "PartitionName"};
constexpr std::array<std::string_view, 11> kQosKeys = {
    "Priority", "MaxJobsPerUser", "MaxSubmitJobsPerUser", "MaxGpusPerUser", "MaxGpusPerAccount",
    "MaxWall",  "Preempt",        "PreemptMode",          "GraceTime",      "PreemptSignal",
    "QOSName"};
constexpr std::array<std::string_view, 3> kAccountKeys = {"Shares", "UserShares", "AccountName"};
constexpr int kMaxIncludeDepth = 8;
// Weights, priorities, shares and limits stay far below INT_MAX so that
// weighted sums and share totals cannot overflow.
constexpr long long kMaxCount = 1'000'000'000;
constexpr long long kMaxBackfillDepth = 1'000'000;
// Slurm's limit on MaxArraySize.
constexpr long long kMaxArraySizeLimit = 4'000'001;
constexpr std::string_view kPreemptModeHint = "use OFF, REQUEUE, CANCEL or SUSPEND";

struct SignalName {
  std::string_view name;
  int number;
};
// The signals a job can be warned with, by name (Linux numbering via <csignal>).
constexpr std::array<SignalName, 22> kSignals = {{
    {"HUP", SIGHUP},       {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT},   {"BUS", SIGBUS},   {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1},   {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},   {"TERM", SIGTERM}, {"CONT", SIGCONT},
    {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},   {"URG", SIGURG},   {"XCPU", SIGXCPU},
    {"VTALRM", SIGVTALRM}, {"WINCH", SIGWINCH},
}};
constexpr int kMaxSignal = 64;

bool Is(const conf::Word& word, std::string_view key) { return EqualsIgnoreCase(word.key, key); }

bool IsLineKey(const conf::Word& word) {
  return Is(word, "NodeName") || Is(word, "PartitionName") || Is(word, "QOSName") ||
         Is(word, "AccountName");
}

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// An integer in [lo, hi]; out of range is reported with the bound it broke.
bool ParseIntIn(const conf::Word& word, long long lo, long long hi, int& out,
                Diagnostics& diagnostics) {
  long long number = 0;
  if (!conf::ParseInt(word,
                      lo <= 0 ? conf::ZeroPolicy::kAllowZero : conf::ZeroPolicy::kPositiveOnly,
                      number, diagnostics)) {
    return false;
  }
  if (number < lo || number > hi) {
    diagnostics.Error(word.value_at,
                      fmt::format("{}={} is {} {}", word.key, number,
                                  number < lo ? "less than" : "more than", number < lo ? lo : hi),
                      fmt::format("write {}=<number from {} to {}>", word.key, lo, hi));
    return false;
  }
  out = static_cast<int>(number);
  return true;
}

// A count limit: UNLIMITED clears it (overriding a DEFAULT line), else 0 or more.
bool ParseCountLimit(const conf::Word& word, std::optional<int>& out, Diagnostics& diagnostics) {
  if (EqualsIgnoreCase(word.value, "UNLIMITED")) {
    out.reset();
    return true;
  }
  int number = 0;
  if (!ParseIntIn(word, 0, kMaxCount, number, diagnostics)) return false;
  out = number;
  return true;
}

enum class UnlimitedPolicy { kAllow, kReject };

// A time in sbatch --time's forms (a plain number is minutes).
bool ParseTimeValue(const conf::Word& word, UnlimitedPolicy unlimited, std::chrono::seconds& out,
                    Diagnostics& diagnostics) {
  absl::StatusOr<std::chrono::seconds> time = ParseSlurmTime(word.value);
  if (!time.ok()) {
    diagnostics.Error(word.value_at, fmt::format("{}: {}", word.key, time.status().message()),
                      fmt::format("for example {}=2-00:00:00", word.key));
    return false;
  }
  if (*time == kUnlimited && unlimited == UnlimitedPolicy::kReject) {
    diagnostics.Error(word.value_at, fmt::format("{} cannot be {}", word.key, word.value),
                      fmt::format("give a time, for example {}=2-00:00:00", word.key));
    return false;
  }
  out = *time;
  return true;
}

// A grace time as Slurm's GraceTime: a plain number is seconds; a value with
// ':' or '-' is a time in sbatch --time's forms.
bool ParseGraceTime(const conf::Word& word, std::chrono::seconds& out, Diagnostics& diagnostics) {
  if (AllDigits(word.value)) {
    int number = 0;
    if (!ParseIntIn(word, 0, kMaxCount, number, diagnostics)) return false;
    out = std::chrono::seconds(number);
    return true;
  }
  absl::StatusOr<std::chrono::seconds> time = ParseSlurmTime(word.value);
  if (!time.ok() || *time == kUnlimited) {
    diagnostics.Error(
        word.value_at,
        fmt::format("{}=\"{}\" is neither seconds nor a finite time", word.key, word.value),
        fmt::format("write seconds ({}=120) or a time ({}=2:00 for 2 minutes)", word.key,
                    word.key));
    return false;
  }
  out = *time;
  return true;
}

bool ParsePreemptMode(const conf::Word& word, PreemptMode& out, Diagnostics& diagnostics) {
  constexpr std::array<PreemptMode, 4> kModes = {PreemptMode::kOff, PreemptMode::kRequeue,
                                                 PreemptMode::kCancel, PreemptMode::kSuspend};
  for (const PreemptMode mode : kModes) {
    if (EqualsIgnoreCase(word.value, PreemptModeName(mode))) {
      out = mode;
      return true;
    }
  }
  // Slurm's other modes, alone or combined (SUSPEND,GANG): name the one we lack.
  for (const std::string& part : conf::SplitCommas(word.value)) {
    if (EqualsIgnoreCase(part, "GANG") || EqualsIgnoreCase(part, "WITHIN") ||
        EqualsIgnoreCase(part, "PRIORITY")) {
      diagnostics.Error(
          word.value_at,
          fmt::format("{}={}: Slurm's {} mode is not supported", word.key, word.value, part),
          fmt::format("{}; which jobs may preempt which follows PriorityTier and "
                      "QOS Preempt=",
                      kPreemptModeHint));
      return false;
    }
  }
  diagnostics.Error(
      word.value_at,
      fmt::format("{}={} is not OFF, REQUEUE, CANCEL or SUSPEND", word.key, word.value),
      fmt::format("{}, one mode per line", kPreemptModeHint));
  return false;
}

// A signal by name (USR1, SIGUSR1, any case) or number; stored as the number.
bool ParseSignal(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  std::string_view value = word.value;
  int number = 0;
  if (AllDigits(value)) {
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || number < 1 || number > kMaxSignal) {
      diagnostics.Error(
          word.value_at,
          fmt::format("{}={} is not a signal number from 1 to {}", word.key, value, kMaxSignal),
          fmt::format("write a name such as {}=USR1, or its number", word.key));
      return false;
    }
  } else {
    if (value.size() > 3 && EqualsIgnoreCase(value.substr(0, 3), "SIG")) value.remove_prefix(3);
    const auto* found = std::find_if(kSignals.begin(), kSignals.end(), [&](const SignalName& s) {
      return EqualsIgnoreCase(s.name, value);
    });
    if (found == kSignals.end()) {
      std::vector<std::string_view> names;
      for (const SignalName& s : kSignals) {
        if (s.number != SIGKILL && s.number != SIGSTOP) names.push_back(s.name);
      }
      diagnostics.Error(word.value_at, fmt::format("{}={} is not a signal", word.key, word.value),
                        fmt::format("use one of {} (with or without SIG), or a number from 1 to {}",
                                    fmt::join(names, ", "), kMaxSignal));
      return false;
    }
    number = found->number;
  }
  if (number == SIGKILL || number == SIGSTOP) {
    diagnostics.Error(
        word.value_at,
        fmt::format("{}={}: SIG{} cannot be caught, so the job could not checkpoint", word.key,
                    word.value, number == SIGKILL ? "KILL" : "STOP"),
        fmt::format("warn with a signal the job can catch, such as {}=USR1", word.key));
    return false;
  }
  out = number;
  return true;
}

// UserShares=alice:2,bob: a user without :N has 1 share. Errors point at the item.
bool ParseUserShares(const conf::Word& word, std::vector<std::pair<std::string, int>>& out,
                     Diagnostics& diagnostics) {
  out.clear();
  const std::string_view value = word.value;
  bool ok = true;
  for (std::size_t start = 0; start <= value.size();) {
    const std::size_t comma = value.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? value.size() : comma;
    const std::string_view item = value.substr(start, end - start);
    SourceLocation at = word.value_at;
    at.column += static_cast<int>(start);
    if (!item.empty()) {
      const std::size_t colon = item.find(':');
      const std::string_view user = item.substr(0, colon);
      int shares = 1;
      bool item_ok = true;
      if (user.empty()) {
        diagnostics.Error(at, fmt::format("UserShares: \"{}\" names no user", item),
                          "write UserShares=alice:2,bob (a user without :N has 1 share)");
        item_ok = false;
      } else if (colon != std::string_view::npos) {
        const std::string_view number = item.substr(colon + 1);
        const auto [ptr, error] =
            std::from_chars(number.data(), number.data() + number.size(), shares);
        if (number.empty() || error != std::errc() || ptr != number.data() + number.size() ||
            shares < 1 || shares > kMaxCount) {
          diagnostics.Error(at,
                            fmt::format("UserShares: \"{}\": shares must be a positive integer "
                                        "up to {}",
                                        item, kMaxCount),
                            fmt::format("write {}:1 or more", user));
          item_ok = false;
        }
      }
      if (item_ok) {
        const bool seen = std::any_of(out.begin(), out.end(),
                                      [&](const auto& entry) { return entry.first == user; });
        if (seen) {
          diagnostics.Error(at, fmt::format("UserShares: user {} is listed twice", user),
                            "give each user one entry");
          item_ok = false;
        } else {
          out.emplace_back(std::string(user), shares);
        }
      }
      ok &= item_ok;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ok;
}

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
      diagnostics.Error(
          at,
          fmt::format("GpuNuma: \"{}\" is not a NUMA node number from 0 to {}", item, kMaxNumaNode),
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
      } else if (Is(head, "QOSName")) {
        ParseQosLine(line);
      } else if (Is(head, "AccountName")) {
        ParseAccountLine(line);
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
    CheckQos(config);
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
          diagnostics_.Error(word.value_at,
                             fmt::format("ControllerPort {} is not a TCP port", number),
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
        std::transform(config.state_sync.begin(), config.state_sync.end(),
                       config.state_sync.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      } else {
        diagnostics_.Error(word.value_at,
                           fmt::format("StateSync={} is not full, normal or off", word.value),
                           "use StateSync=full (safest), normal or off; see docs/operations.md");
      }
    } else if (Is(word, "HistoryDays")) {
      if (conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics_)) {
        config.history_days = static_cast<int>(std::min<long long>(number, 100000));
      }
    } else if (Is(word, "Include")) {
      Include(word, file, depth);
    } else if (Is(word, "PriorityWeightAge")) {
      (void)ParseIntIn(word, 0, kMaxCount, config.priority.age, diagnostics_);
    } else if (Is(word, "PriorityWeightFairshare")) {
      (void)ParseIntIn(word, 0, kMaxCount, config.priority.fairshare, diagnostics_);
    } else if (Is(word, "PriorityWeightJobSize")) {
      (void)ParseIntIn(word, 0, kMaxCount, config.priority.job_size, diagnostics_);
    } else if (Is(word, "PriorityWeightPartition")) {
      (void)ParseIntIn(word, 0, kMaxCount, config.priority.partition, diagnostics_);
    } else if (Is(word, "PriorityWeightQOS")) {
      (void)ParseIntIn(word, 0, kMaxCount, config.priority.qos, diagnostics_);
    } else if (Is(word, "PriorityMaxAge")) {
      std::chrono::seconds age{0};
      if (!ParseTimeValue(word, UnlimitedPolicy::kReject, age, diagnostics_)) return;
      if (age <= std::chrono::seconds(0)) {
        diagnostics_.Error(word.value_at, "PriorityMaxAge must be longer than 0",
                           "the age factor reaches 1 at this age; for example PriorityMaxAge=7-0");
        return;
      }
      config.priority.max_age = age;
    } else if (Is(word, "PriorityDecayHalfLife")) {
      std::chrono::seconds half_life{0};
      if (!ParseTimeValue(word, UnlimitedPolicy::kAllow, half_life, diagnostics_)) return;
      if (half_life <= std::chrono::seconds(0)) {
        diagnostics_.Error(word.value_at, "PriorityDecayHalfLife must be longer than 0",
                           "past usage counts half after this time; for example "
                           "PriorityDecayHalfLife=7-0, or UNLIMITED for no decay");
        return;
      }
      config.priority.decay_half_life = half_life;
    } else if (Is(word, "PriorityFavorSmall")) {
      (void)conf::ParseYesNo(word, config.priority.favor_small, diagnostics_);
    } else if (Is(word, "PreemptMode")) {
      (void)ParsePreemptMode(word, config.preempt_mode, diagnostics_);
    } else if (Is(word, "PreemptGraceTime")) {
      (void)ParseGraceTime(word, config.preempt_grace_time, diagnostics_);
    } else if (Is(word, "PreemptExemptTime")) {
      (void)ParseTimeValue(word, UnlimitedPolicy::kReject, config.preempt_exempt_time,
                           diagnostics_);
    } else if (Is(word, "PreemptSignal")) {
      (void)ParseSignal(word, config.preempt_signal, diagnostics_);
    } else if (Is(word, "BackfillDepth")) {
      (void)ParseIntIn(word, 1, kMaxBackfillDepth, config.backfill_depth, diagnostics_);
    } else if (Is(word, "MaxArraySize")) {
      (void)ParseIntIn(word, 1, kMaxArraySizeLimit, config.max_array_size, diagnostics_);
    } else if (Is(word, "DefaultQOS")) {
      if (word.value.empty()) {
        diagnostics_.Error(word.value_at, "DefaultQOS is empty",
                           "name the QOS of jobs that ask for none, as DefaultQOS=normal");
      } else {
        config.default_qos = word.value;
      }
    } else if (IsLineKey(word)) {
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
      } else if (Is(word, "Sockets") || Is(word, "CoresPerSocket") || Is(word, "ThreadsPerCore")) {
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
      diagnostics_.Error(
          gpu_numa_word != nullptr ? gpu_numa_word->value_at : head.value_at,
          fmt::format("GpuNuma= lists {} NUMA node{} but the node has Gpus={}",
                      spec.gpu_numa.size(), spec.gpu_numa.size() == 1 ? "" : "s", spec.gpus),
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
          diagnostics_.Error(word.value_at,
                             fmt::format("{}: {}", word.key, limit.status().message()),
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
        if (!EqualsIgnoreCase(word.value, "ALL"))
          spec.allow_accounts = conf::SplitCommas(word.value);
      } else if (Is(word, "AllowUsers")) {
        spec.allow_users.clear();
        if (!EqualsIgnoreCase(word.value, "ALL")) spec.allow_users = conf::SplitCommas(word.value);
      } else if (Is(word, "PreemptMode")) {
        PreemptMode mode = PreemptMode::kOff;
        if (ParsePreemptMode(word, mode, diagnostics_)) {
          spec.preempt_mode = mode;
        } else {
          ok = false;
        }
      } else if (Is(word, "GraceTime")) {
        std::chrono::seconds grace{0};
        if (ParseGraceTime(word, grace, diagnostics_)) {
          spec.grace_time = grace;
        } else {
          ok = false;
        }
      } else if (Is(word, "PreemptSignal")) {
        int signal = 0;
        if (ParseSignal(word, signal, diagnostics_)) {
          spec.preempt_signal = signal;
        } else {
          ok = false;
        }
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
                           fmt::format("partition {} is defined twice (first at line {})",
                                       spec.name, other.defined_at.line),
                           "merge the two PartitionName lines");
        return;
      }
    }
    partition_all_[spec.name] = all_nodes;
    result_.config.partitions.push_back(std::move(spec));
  }

  void ParseQosLine(const conf::Line& line) {
    const conf::Word& head = line.words.front();
    const bool is_default_line = EqualsIgnoreCase(head.value, "DEFAULT");
    QosSpec spec = qos_defaults_;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    SourceLocation preempt_at = is_default_line ? head.value_at : qos_default_preempt_at_;
    bool ok = true;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const conf::Word& word = line.words[i];
      if (Is(word, "Priority")) {
        ok &= ParseIntIn(word, 0, kMaxCount, spec.priority, diagnostics_);
      } else if (Is(word, "MaxJobsPerUser")) {
        ok &= ParseCountLimit(word, spec.max_jobs_per_user, diagnostics_);
      } else if (Is(word, "MaxSubmitJobsPerUser")) {
        ok &= ParseCountLimit(word, spec.max_submit_jobs_per_user, diagnostics_);
      } else if (Is(word, "MaxGpusPerUser")) {
        ok &= ParseCountLimit(word, spec.max_gpus_per_user, diagnostics_);
      } else if (Is(word, "MaxGpusPerAccount")) {
        ok &= ParseCountLimit(word, spec.max_gpus_per_account, diagnostics_);
      } else if (Is(word, "MaxWall")) {
        std::chrono::seconds wall{0};
        if (!ParseTimeValue(word, UnlimitedPolicy::kAllow, wall, diagnostics_)) {
          ok = false;
        } else if (wall <= std::chrono::seconds(0)) {
          diagnostics_.Error(word.value_at, "MaxWall must be longer than 0",
                             "write a time such as MaxWall=1-00:00:00, or UNLIMITED");
          ok = false;
        } else if (wall == kUnlimited) {
          spec.max_wall.reset();
        } else {
          spec.max_wall = wall;
        }
      } else if (Is(word, "Preempt")) {
        spec.preempt = conf::SplitCommas(word.value);
        preempt_at = word.value_at;
      } else if (Is(word, "PreemptMode")) {
        PreemptMode mode = PreemptMode::kOff;
        if (ParsePreemptMode(word, mode, diagnostics_)) {
          spec.preempt_mode = mode;
        } else {
          ok = false;
        }
      } else if (Is(word, "GraceTime")) {
        std::chrono::seconds grace{0};
        if (ParseGraceTime(word, grace, diagnostics_)) {
          spec.grace_time = grace;
        } else {
          ok = false;
        }
      } else if (Is(word, "PreemptSignal")) {
        int signal = 0;
        if (ParseSignal(word, signal, diagnostics_)) {
          spec.preempt_signal = signal;
        } else {
          ok = false;
        }
      } else {
        conf::ReportUnknownKey(word, "in a QOSName line", kQosKeys, diagnostics_);
        ok = false;
      }
    }
    if (is_default_line) {
      qos_defaults_ = spec;
      qos_default_preempt_at_ = preempt_at;
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
    qos_preempt_at_[spec.name] = preempt_at;
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
    AccountSpec spec;
    spec.name = head.value;
    spec.defined_at = head.key_at;
    bool ok = true;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const conf::Word& word = line.words[i];
      if (Is(word, "Shares")) {
        ok &= ParseIntIn(word, 1, kMaxCount, spec.shares, diagnostics_);
      } else if (Is(word, "UserShares")) {
        ok &= ParseUserShares(word, spec.user_shares, diagnostics_);
      } else {
        conf::ReportUnknownKey(word, "in an AccountName line", kAccountKeys, diagnostics_);
        ok = false;
      }
    }
    if (!ok) return;
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
                          std::vector<std::string>& including, ClientSettings& out) {
  Diagnostics ignored;
  for (const conf::Line& line : conf::Lex(text, file, ignored)) {
    // A node, partition, QOS or account line holds no global key.
    if (!IsGlobalKey(line.words.front())) continue;
    for (const conf::Word& word : line.words) {
      if (Is(word, "StateDir")) {
        out.state_dir = word.value;
      } else if (Is(word, "AuthKeyFile")) {
        out.auth_key_file = ResolvePath(file, word.value);
      } else if (Is(word, "Include") &&
                 including.size() <= static_cast<std::size_t>(kMaxIncludeDepth)) {
        const std::string path = ResolvePath(file, word.value);
        if (std::find(including.begin(), including.end(), path) != including.end()) continue;
        const absl::StatusOr<std::string> included = loader(path);
        if (!included.ok()) continue;
        including.push_back(path);
        ReadClientSettingsOf(*included, path, loader, including, out);
        including.pop_back();
      }
    }
  }
}

}  // namespace

ClientSettings ReadClientSettings(std::string_view text, std::string_view file,
                                  const FileLoader& loader) {
  const ClusterConfig defaults;
  ClientSettings out{defaults.state_dir, defaults.auth_key_file};
  std::vector<std::string> including{std::string(file)};
  ReadClientSettingsOf(text, file, loader, including, out);
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
