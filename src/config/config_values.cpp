// SPDX-License-Identifier: Apache-2.0
#include "config/config_values.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <initializer_list>

#include <fmt/format.h>

#include "cohort/config/controller_addrs.h"
#include "cohort/fmt_absl.h"
#include "cohort/launch/mpi_type.h"
#include "cohort/text/slurm_time.h"

namespace cohort::config {
namespace {

constexpr int kMaxNumaNode = 1023;  // Linux's MAX_NUMNODES is at most 1024
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

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
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

// A time longer than 0; `key` is the canonical name the message gives.
bool ParseTimeAboveZero(const conf::Word& word, UnlimitedPolicy unlimited, std::string_view key,
                        std::string_view hint, std::chrono::seconds& out,
                        Diagnostics& diagnostics) {
  std::chrono::seconds time{0};
  if (!ParseTimeValue(word, unlimited, time, diagnostics)) return false;
  if (time <= std::chrono::seconds(0)) {
    diagnostics.Error(word.value_at, fmt::format("{} must be longer than 0", key),
                      std::string(hint));
    return false;
  }
  out = time;
  return true;
}

// An integer of `zero`'s range, stored as `convert` makes it of the number.
template <typename T, typename Convert>
bool ParseIntAs(const conf::Word& word, conf::ZeroPolicy zero, T& out, Diagnostics& diagnostics,
                Convert convert) {
  long long number = 0;
  if (!conf::ParseInt(word, zero, number, diagnostics)) return false;
  out = convert(number);
  return true;
}

// A non-negative integer up to `max`; above it, the error says `too_big(number)`.
template <typename Message>
bool ParseIntAtMost(const conf::Word& word, long long max, int& out, Diagnostics& diagnostics,
                    Message too_big, std::string_view hint) {
  long long number = 0;
  if (!conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, number, diagnostics)) return false;
  if (number > max) {
    diagnostics.Error(word.value_at, too_big(number), std::string(hint));
    return false;
  }
  out = static_cast<int>(number);
  return true;
}

}  // namespace

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

bool ParsePartitionState(const conf::Word& word, PartitionState& out, Diagnostics& diagnostics) {
  if (const std::optional<PartitionState> state = ParsePartitionStateName(word.value)) {
    out = *state;
    return true;
  }
  diagnostics.Error(word.value_at,
                    fmt::format("{}={}: not a partition state", word.key, word.value),
                    "write UP (takes and starts jobs), DOWN (takes jobs, starts none), DRAIN "
                    "(starts those queued, takes no new ones) or INACTIVE (neither)");
  return false;
}

bool ParseUsageReset(const conf::Word& word, UsageResetPeriod& out, Diagnostics& diagnostics) {
  if (const std::optional<UsageResetPeriod> period = ParseUsageResetPeriod(word.value)) {
    out = *period;
    return true;
  }
  diagnostics.Error(word.value_at, fmt::format("{}={}: not a usage period", word.key, word.value),
                    "write NONE (budgets never start again), DAILY, WEEKLY, MONTHLY, QUARTERLY "
                    "or YEARLY");
  return false;
}

bool ParseAccountLimit(const conf::Word& word, AssocLimits& out, Diagnostics& diagnostics) {
  if (absl::Status set = SetLimit(word.key, word.value, out); !set.ok()) {
    diagnostics.Error(word.value_at, std::string(set.message()));
    return false;
  }
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

// Resolves `path` against the folder of `from`, as Slurm resolves Include.
std::string ResolvePath(std::string_view from, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || from.empty()) return path;
  return (std::filesystem::path(from).parent_path() / p).lexically_normal().string();
}

bool ParseNodeGres(const conf::Word& word, int& gpus, std::string& type, Diagnostics& diagnostics) {
  const std::string_view value = word.value;
  const auto refuse = [&](std::string message) {
    diagnostics.Error(word.value_at, std::move(message),
                      "write Gres=gpu:N or Gres=gpu:TYPE:N, such as Gres=gpu:h100:8");
    return false;
  };
  if (value.find(',') != std::string_view::npos) {
    return refuse(
        fmt::format("Gres={}: a node has one kind of GPU here; several are not supported", value));
  }
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = value.find(':', start);
    parts.push_back(value.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.front() != "gpu") {
    return refuse(fmt::format("Gres={}: GPUs are the only generic resource", value));
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return refuse(fmt::format("Gres={}: give the GPUs' count, and their type if you like", value));
  }
  const std::string_view count_text = parts.back();
  int count = -1;
  const auto [end, error] =
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
  if (count_text.empty() || error != std::errc() || end != count_text.data() + count_text.size() ||
      count < 0 || count > 64) {
    return refuse(
        fmt::format("Gres={}: \"{}\" is not a GPU count from 0 to 64", value, count_text));
  }
  type.clear();
  if (parts.size() == 3) {
    const std::string_view name = parts[1];
    const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
    });
    if (!valid) return refuse(fmt::format("Gres={}: \"{}\" is not a GPU type name", value, name));
    type = std::string(name);
  }
  gpus = count;
  return true;
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

bool ParsePositiveInt(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kPositiveOnly, out, diagnostics,
                    [](long long number) { return static_cast<int>(number); });
}

bool ParseNonNegativeInt(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kAllowZero, out, diagnostics,
                    [](long long number) { return static_cast<int>(number); });
}

bool ParsePositiveInt64(const conf::Word& word, std::int64_t& out, Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kPositiveOnly, out, diagnostics,
                    [](long long number) { return static_cast<std::int64_t>(number); });
}

bool ParseShapeCount(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kPositiveOnly, out, diagnostics, [](long long number) {
    return static_cast<int>(std::min<long long>(number, 1 << 20));
  });
}

bool ParseGpuCount(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAtMost(
      word, 64, out, diagnostics,
      [](long long number) { return fmt::format("Gpus={} is more than 64 per node", number); },
      "a node holds at most 64 GPUs");
}

bool ParseRequeueBackoff(const conf::Word& word, std::chrono::seconds& out,
                         Diagnostics& diagnostics) {
  int seconds = 0;
  if (!ParseIntAtMost(
          word, 86'400, seconds, diagnostics,
          [](long long number) {
            return fmt::format("RequeueBackoff={} is more than a day", number);
          },
          "give the first restart's wait in seconds, at most 86400")) {
    return false;
  }
  out = std::chrono::seconds(seconds);
  return true;
}

bool ParsePort(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAtMost(
      word, 65535, out, diagnostics,
      [](long long number) { return fmt::format("ControllerPort {} is not a TCP port", number); },
      "use a port between 1 and 65535, or 0 for any free port");
}

bool ParseHistoryDays(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kAllowZero, out, diagnostics, [](long long number) {
    return static_cast<int>(std::min<long long>(number, 100000));
  });
}

bool ParsePositiveSeconds(const conf::Word& word, std::chrono::seconds& out,
                          Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kPositiveOnly, out, diagnostics,
                    [](long long number) { return std::chrono::seconds(number); });
}

bool ParseNonNegativeSeconds(const conf::Word& word, std::chrono::seconds& out,
                             Diagnostics& diagnostics) {
  return ParseIntAs(word, conf::ZeroPolicy::kAllowZero, out, diagnostics,
                    [](long long number) { return std::chrono::seconds(number); });
}

bool ParseNodeLimit(const conf::Word& word, std::optional<int>& out, Diagnostics& diagnostics) {
  if (EqualsIgnoreCase(word.value, "UNLIMITED")) {
    out.reset();
    return true;
  }
  int number = 0;
  if (!ParsePositiveInt(word, number, diagnostics)) return false;
  out = number;
  return true;
}

bool ParseTime(const conf::Word& word, std::chrono::seconds& out, Diagnostics& diagnostics) {
  return ParseTimeValue(word, UnlimitedPolicy::kAllow, out, diagnostics);
}

bool ParseFiniteTime(const conf::Word& word, std::chrono::seconds& out, Diagnostics& diagnostics) {
  return ParseTimeValue(word, UnlimitedPolicy::kReject, out, diagnostics);
}

bool ParseMaxAge(const conf::Word& word, std::chrono::seconds& out, Diagnostics& diagnostics) {
  return ParseTimeAboveZero(word, UnlimitedPolicy::kReject, "PriorityMaxAge",
                            "the age factor reaches 1 at this age; for example PriorityMaxAge=7-0",
                            out, diagnostics);
}

bool ParseHalfLife(const conf::Word& word, std::chrono::seconds& out, Diagnostics& diagnostics) {
  return ParseTimeAboveZero(word, UnlimitedPolicy::kAllow, "PriorityDecayHalfLife",
                            "past usage counts half after this time; for example "
                            "PriorityDecayHalfLife=7-0, or UNLIMITED for no decay",
                            out, diagnostics);
}

bool ParseMaxWall(const conf::Word& word, std::optional<std::chrono::seconds>& out,
                  Diagnostics& diagnostics) {
  std::chrono::seconds wall{0};
  if (!ParseTimeAboveZero(word, UnlimitedPolicy::kAllow, "MaxWall",
                          "write a time such as MaxWall=1-00:00:00, or UNLIMITED", wall,
                          diagnostics)) {
    return false;
  }
  if (wall == kUnlimited) {
    out.reset();
  } else {
    out = wall;
  }
  return true;
}

bool ParseText(const conf::Word& word, std::string& out, Diagnostics& /*diagnostics*/) {
  out = word.value;
  return true;
}

bool ParseDefaultQos(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  if (word.value.empty()) {
    diagnostics.Error(word.value_at, "DefaultQOS is empty",
                      "name the QOS of jobs that ask for none, as DefaultQOS=normal");
    return false;
  }
  out = word.value;
  return true;
}

namespace {

// A value that is one of `choices`, in any case, stored in lowercase; else
// an error at its place: "KEY=VALUE is not A, B or C", then `hint`.
bool ParseChoice(const conf::Word& word, std::string_view key,
                 std::initializer_list<std::string_view> choices, std::string_view hint,
                 std::string& out, Diagnostics& diagnostics) {
  if (std::none_of(choices.begin(), choices.end(),
                   [&](std::string_view choice) { return EqualsIgnoreCase(word.value, choice); })) {
    std::string listed;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (i > 0) listed += i + 1 == choices.size() ? " or " : ", ";
      listed += *(choices.begin() + i);
    }
    diagnostics.Error(word.value_at, fmt::format("{}={} is not {}", key, word.value, listed),
                      std::string(hint));
    return false;
  }
  out = word.value;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

}  // namespace

bool ParseStateSync(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  return ParseChoice(word, "StateSync", {"full", "normal", "off"},
                     "use StateSync=full (safest), normal or off; see docs/operations.md", out,
                     diagnostics);
}

bool ParseSwitchType(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  std::string_view value = word.value;
  if (value.size() > 7 && EqualsIgnoreCase(value.substr(0, 7), "switch/")) value.remove_prefix(7);
  for (const std::string_view known : {"none", "nvidia_imex"}) {
    if (EqualsIgnoreCase(value, known)) {
      out = known;
      return true;
    }
  }
  diagnostics.Error(
      word.value_at,
      fmt::format("SwitchType={} is not switch/none or switch/nvidia_imex", word.value),
      "use SwitchType=switch/nvidia_imex for an IMEX channel per job (GB200/GB300 "
      "NVLink domains), or leave it out");
  return false;
}

bool ParseTopologyBlocks(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  return ParseChoice(word, "TopologyBlocks", {"file", "auto"},
                     "use TopologyBlocks=auto for blocks from the NVLink domains the nodes report, "
                     "or file (the default) for topology.conf's BlockName lines",
                     out, diagnostics);
}

bool ParseSwitchParameters(const conf::Word& word, ImexParameters& out, Diagnostics& diagnostics) {
  const auto bad = [&](std::string what, std::string hint) {
    diagnostics.Error(word.value_at, fmt::format("SwitchParameters: {}", what), std::move(hint));
    return false;
  };
  for (const std::string& item : conf::SplitCommas(word.value)) {
    const std::size_t equals = item.find('=');
    const std::string key = item.substr(0, equals);
    const std::string value = equals == std::string::npos ? std::string() : item.substr(equals + 1);
    const auto number = [&](int low, int high) -> std::optional<int> {
      int n = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (error != std::errc() || end != value.data() + value.size() || n < low || n > high) {
        return std::nullopt;
      }
      return n;
    };
    if (EqualsIgnoreCase(key, "imex_channel_count")) {
      const std::optional<int> n = number(1, 65536);
      if (!n)
        return bad(fmt::format("imex_channel_count={:?} is not 1-65536", value),
                   "such as imex_channel_count=2048");
      out.channel_count = *n;
    } else if (EqualsIgnoreCase(key, "imex_dev_major")) {
      const std::optional<int> n = number(0, 4095);
      if (!n)
        return bad(fmt::format("imex_dev_major={:?} is not 0-4095", value),
                   "give the major of nvidia-caps-imex-channels in /proc/devices, or leave it out "
                   "to read it there");
      out.dev_major = *n;
    } else if (EqualsIgnoreCase(key, "imex_channel_per")) {
      if (!EqualsIgnoreCase(value, "job") && !EqualsIgnoreCase(value, "segment")) {
        return bad(fmt::format("imex_channel_per={:?} is not job or segment", value),
                   "one channel per job (the default), or per --segment");
      }
      out.per_segment = EqualsIgnoreCase(value, "segment");
    } else if (EqualsIgnoreCase(key, "imex_channel_dir")) {
      if (!value.starts_with('/'))
        return bad(fmt::format("imex_channel_dir={:?} is not an absolute path", value),
                   "such as imex_channel_dir=/dev/nvidia-caps-imex-channels");
      out.channel_dir = value;
    } else {
      return bad(fmt::format("{:?} is not a parameter Cohort knows", item),
                 "known: imex_channel_count=N, imex_dev_major=N, imex_channel_per=job|segment, "
                 "imex_channel_dir=PATH");
    }
  }
  return true;
}

bool ParseMpiType(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  const std::optional<std::string_view> type = launch::CanonicalMpiType(word.value);
  if (!type) {
    diagnostics.Error(word.value_at, fmt::format("MpiDefault={} is no MPI type", word.value),
                      fmt::format("use one of {}; see docs/mpi.md", launch::kMpiTypes));
    return false;
  }
  out = *type;
  return true;
}

bool ParseGatherFrequency(const conf::Word& word, std::chrono::seconds& out,
                          Diagnostics& diagnostics) {
  std::string_view text = word.value;
  if (text.size() > 5 && EqualsIgnoreCase(text.substr(0, 5), "task=")) text.remove_prefix(5);
  constexpr long long kDay = 86400;
  long long seconds = -1;
  if (!text.empty() && text.size() <= 6 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    seconds = std::stoll(std::string(text));
  }
  if (seconds < 0 || seconds > kDay) {
    diagnostics.Error(
        word.value_at, fmt::format("JobAcctGatherFrequency={} is no sample period", word.value),
        "write the seconds between samples of what jobs use, e.g. JobAcctGatherFrequency=30 or "
        "task=30 (0: never; at most 86400); Cohort samples tasks alone, not energy, network "
        "or filesystem");
    return false;
  }
  out = std::chrono::seconds(seconds);
  return true;
}

bool ParseContainerRuntime(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  return ParseChoice(
      word, "ContainerRuntime", {"builtin", "none"},
      "Cohort makes its containers itself (docs/containers.md says why): use "
      "ContainerRuntime=builtin, or ContainerRuntime=none to run no containers on the cluster",
      out, diagnostics);
}

bool ParseStateBackend(const conf::Word& word, std::string& out, Diagnostics& diagnostics) {
  return ParseChoice(word, "StateBackend", {"sqlite", "postgresql"},
                     "use StateBackend=sqlite (one controller, state in StateDir) or "
                     "StateBackend=postgresql with StateDatabase= (a standby may take over); "
                     "see docs/operations.md",
                     out, diagnostics);
}

bool ParseControllerAddr(const conf::Word& word, ClusterConfig& out, Diagnostics& diagnostics) {
  // Checked with any port: ControllerPort= may come later in the file.
  absl::StatusOr<std::vector<std::string>> list =
      ParseControllerList(word.value, 1, "ControllerAddr");
  if (!list.ok()) {
    diagnostics.Error(word.value_at, std::string(list.status().message()),
                      "as ControllerAddr=10.0.0.1 or ControllerAddr=ctl1,ctl2:6821");
    return false;
  }
  out.controller_addrs = SplitEntries(word.value);
  // The controller listens on the first host unless told otherwise.
  std::string_view host = HostOf(list->front());
  if (host.starts_with('[')) host = host.substr(1, host.size() - 2);
  out.controller_addr = host.empty() ? list->front() : std::string(host);
  return true;
}

bool ParseAuthType(const conf::Word& word, AuthType& out, Diagnostics& diagnostics) {
  std::string_view value = word.value;
  if (value.size() > 5 && EqualsIgnoreCase(value.substr(0, 5), "auth/")) value.remove_prefix(5);
  if (EqualsIgnoreCase(value, "munge")) {
    out = AuthType::kMunge;
  } else if (EqualsIgnoreCase(value, "none")) {
    out = AuthType::kNone;
  } else {
    diagnostics.Error(word.value_at, fmt::format("AuthType={} is not munge or none", word.value),
                      "use AuthType=munge (users and agents prove themselves with munged's "
                      "credentials) or AuthType=none (one trusted host only)");
    return false;
  }
  return true;
}

bool ParseAuthInfo(const conf::Word& word, std::string& munge_socket, Diagnostics& diagnostics) {
  for (const std::string& item : conf::SplitCommas(word.value)) {
    const std::size_t equals = item.find('=');
    const std::string_view key = std::string_view(item).substr(0, equals);
    if (equals == std::string::npos || !EqualsIgnoreCase(key, "socket") ||
        equals + 1 == item.size()) {
      diagnostics.Error(word.value_at, fmt::format("AuthInfo item \"{}\" is not socket=PATH", item),
                        "write AuthInfo=socket=/run/munge/munge.socket.2 (munged's socket); "
                        "Cohort takes no other AuthInfo option");
      return false;
    }
    munge_socket = item.substr(equals + 1);
  }
  return true;
}

bool ParsePrivateData(const conf::Word& word, PrivateData& out, Diagnostics& diagnostics) {
  out = PrivateData{};
  for (const std::string& item : conf::SplitCommas(word.value)) {
    if (EqualsIgnoreCase(item, "jobs")) {
      out.jobs = true;
    } else if (EqualsIgnoreCase(item, "usage")) {
      out.usage = true;
    } else {
      diagnostics.Error(word.value_at,
                        fmt::format("PrivateData item \"{}\" is not jobs or usage", item),
                        "write PrivateData=jobs,usage or a part of it; nodes, partitions and "
                        "the topology are visible to every user");
      return false;
    }
  }
  return true;
}

bool ParseRegistryMirrors(const conf::Word& word, std::vector<std::string>& out,
                          Diagnostics& diagnostics) {
  out = conf::SplitCommas(word.value);
  for (const std::string& mirror : out) {
    const std::size_t equals = mirror.find('=');
    const std::string_view url = equals == std::string::npos
                                     ? std::string_view()
                                     : std::string_view(mirror).substr(equals + 1);
    if (equals == 0 || equals == std::string::npos ||
        !(url.starts_with("http://") || url.starts_with("https://")) || url.size() < 9) {
      diagnostics.Error(word.value_at,
                        fmt::format("ContainerRegistryMirrors: {:?} is not REGISTRY=URL", mirror),
                        "write the registry as images name it and its mirror's http:// or "
                        "https:// URL: nvcr.io=https://mirror.example:5000");
      return false;
    }
  }
  return true;
}

bool ParseCommaList(const conf::Word& word, std::vector<std::string>& out,
                    Diagnostics& /*diagnostics*/) {
  out = conf::SplitCommas(word.value);
  return true;
}

bool ParseListOrAll(const conf::Word& word, std::vector<std::string>& out,
                    Diagnostics& /*diagnostics*/) {
  out.clear();
  if (!EqualsIgnoreCase(word.value, "ALL")) out = conf::SplitCommas(word.value);
  return true;
}

namespace {

struct SeamNames {
  std::string_view kind;     ///< what every name of the seam starts with, before the '/'
  std::string_view what;     ///< the seam, in the words of the docs
  std::string_view example;  ///< the default policy
};
// By Seam's order; the defaults are PluginChoice's.
constexpr std::array<SeamNames, 5> kSeams = {{
    {"priority", "queue order", "priority/multifactor"},
    {"admission", "admission", "admission/limits"},
    {"filter", "node filter", "filter/resources"},
    {"score", "node score", "score/locality"},
    {"domain", "domain score", "domain/tightest"},
}};

const SeamNames& NamesOf(Seam seam) { return kSeams[static_cast<std::size_t>(seam)]; }

bool IsNameCharacter(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

// Checks one `kind/name` item of word's value that starts `offset` characters
// into it, reporting at the item's column.
bool CheckPolicyItem(const conf::Word& word, Seam seam, std::string_view item, std::size_t offset,
                     Diagnostics& diagnostics) {
  const SeamNames& names = NamesOf(seam);
  SourceLocation at = word.value_at;
  at.column += static_cast<int>(offset);
  const std::string write =
      fmt::format("write {}={}/<name>, as {}={}", word.key, names.kind, word.key, names.example);
  const std::size_t slash = item.find('/');
  if (slash == std::string_view::npos || slash == 0) {
    diagnostics.Error(at, fmt::format("{}: \"{}\" is not a kind/name policy name", word.key, item),
                      write);
    return false;
  }
  const std::string_view kind = item.substr(0, slash);
  const std::string_view name = item.substr(slash + 1);
  if (kind != names.kind) {
    diagnostics.Error(
        at,
        fmt::format("{}: \"{}\" is a {}/ policy, not a {}/ one", word.key, item, kind, names.kind),
        fmt::format("{} chooses the {} policy: {}", word.key, names.what, write));
    return false;
  }
  if (name.empty()) {
    diagnostics.Error(at, fmt::format("{}: \"{}\" has no name after the '/'", word.key, item),
                      write);
    return false;
  }
  const auto* bad = std::find_if_not(name.begin(), name.end(), IsNameCharacter);
  if (bad != name.end()) {
    at.column += static_cast<int>(slash + 1 + static_cast<std::size_t>(bad - name.begin()));
    diagnostics.Error(
        at, fmt::format("{}: \"{}\": '{}' cannot be in a policy name", word.key, item, *bad),
        fmt::format("names are letters, digits, '_', '-' and '.' after the {}/, as {}={}",
                    names.kind, word.key, names.example));
    return false;
  }
  return true;
}

}  // namespace

bool ParsePolicyName(const conf::Word& word, Seam seam, std::string& out,
                     Diagnostics& diagnostics) {
  if (word.value.empty()) {
    diagnostics.Error(word.value_at, fmt::format("{} is empty", word.key),
                      fmt::format("name the {} policy, as {}={}", NamesOf(seam).what, word.key,
                                  NamesOf(seam).example));
    return false;
  }
  if (!CheckPolicyItem(word, seam, word.value, 0, diagnostics)) return false;
  out = word.value;
  return true;
}

bool ParsePolicyList(const conf::Word& word, Seam seam, std::vector<std::string>& out,
                     Diagnostics& diagnostics) {
  const SeamNames& names = NamesOf(seam);
  if (word.value.empty()) {
    diagnostics.Error(
        word.value_at, fmt::format("{} is empty", word.key),
        fmt::format("name at least one {} policy, as {}={}", names.what, word.key, names.example));
    return false;
  }
  std::vector<std::string> items;
  bool ok = true;
  const std::string_view value = word.value;
  for (std::size_t start = 0;;) {
    const std::size_t comma = value.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? value.size() : comma;
    const std::string_view item = value.substr(start, end - start);
    SourceLocation at = word.value_at;
    at.column += static_cast<int>(start);
    if (item.empty()) {
      diagnostics.Error(at, fmt::format("{}: empty name in \"{}\"", word.key, value),
                        fmt::format("separate the names with single commas, as {}={},{}/<name>",
                                    word.key, names.example, names.kind));
      ok = false;
    } else if (std::find(items.begin(), items.end(), item) != items.end()) {
      diagnostics.Error(at, fmt::format("{}: {} is listed twice", word.key, item),
                        fmt::format("give each {} policy once", names.what));
      ok = false;
    } else if (CheckPolicyItem(word, seam, item, start, diagnostics)) {
      items.emplace_back(item);
    } else {
      ok = false;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (!ok) return false;
  out = std::move(items);
  return true;
}

}  // namespace cohort::config
