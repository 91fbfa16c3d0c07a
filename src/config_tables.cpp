// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <array>
#include <string>

#include "config_keys.h"
#include "config_values.h"

namespace cohort::config {
namespace {

template <typename T, std::size_t... kSizes>
constexpr std::array<T, (kSizes + ...)> Concat(const std::array<T, kSizes>&... parts) {
  std::array<T, (kSizes + ...)> out{};
  std::size_t at = 0;
  ((std::copy(parts.begin(), parts.end(), out.begin() + static_cast<std::ptrdiff_t>(at)),
    at += kSizes),
   ...);
  return out;
}

// How a preempted job is warned and stopped: the cluster's defaults (global
// keys) and a partition's or a QOS's own, for its jobs as victims. One block
// of rows serves the three kinds of line; only the grace key's name differs
// (PreemptGraceTime= globally, GraceTime= on a line, as in Slurm).
template <typename Line, auto kMode, auto kGrace, auto kSignal>
constexpr std::array<KeyRow<Line>, 3> PreemptionRows(std::string_view grace_key) {
  return {{{"PreemptMode", &Set<Line, &ParsePreemptMode, kMode>},
           {grace_key, &Set<Line, &ParseGraceTime, kGrace>},
           {"PreemptSignal", &Set<Line, &ParseSignal, kSignal>}}};
}

using G = GlobalLine;
using C = ClusterConfig;
using W = PriorityWeights;
using P = PluginChoice;
constexpr auto kDaemonAndPriorityRows = std::to_array<KeyRow<G>>({
    {"ClusterName", &Set<G, &ParseText, &C::cluster_name>},
    {"ControllerAddr", &Set<G, &ParseText, &C::controller_addr>},
    {"ControllerPort", &Set<G, &ParsePort, &C::controller_port>},
    {"StateDir", &Set<G, &ParseText, &C::state_dir>},
    {"AuthKeyFile",
     [](const conf::Word& word, G& line, Diagnostics& /*diagnostics*/) {
       line.target.auth_key_file = ResolvePath(line.file, word.value);
       return true;
     }},
    {"TopologyFile",
     [](const conf::Word& word, G& line, Diagnostics& /*diagnostics*/) {
       line.target.topology_file = ResolvePath(line.file, word.value);
       return true;
     }},
    {"NodeTimeout", &Set<G, &ParsePositiveSeconds, &C::node_timeout>},
    {"KillWait", &Set<G, &ParseNonNegativeSeconds, &C::kill_wait>},
    {"StateSync", &Set<G, &ParseStateSync, &C::state_sync>},
    {"HistoryDays", &Set<G, &ParseHistoryDays, &C::history_days>},
    {"PriorityWeightAge", &Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::age>},
    {"PriorityWeightFairshare", &Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::fairshare>},
    {"PriorityWeightJobSize", &Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::job_size>},
    {"PriorityWeightPartition", &Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::partition>},
    {"PriorityWeightQOS", &Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::qos>},
    {"PriorityMaxAge", &Set<G, &ParseMaxAge, &C::priority, &W::max_age>},
    {"PriorityDecayHalfLife", &Set<G, &ParseHalfLife, &C::priority, &W::decay_half_life>},
    {"PriorityFavorSmall", &Set<G, &conf::ParseYesNo, &C::priority, &W::favor_small>},
});
constexpr auto kSchedulingRows = std::to_array<KeyRow<G>>({
    {"PreemptExemptTime", &Set<G, &ParseFiniteTime, &C::preempt_exempt_time>},
    {"BackfillDepth", &Set<G, &ParseIntFrom<1, kMaxBackfillDepth>, &C::backfill_depth>},
    {"MaxArraySize", &Set<G, &ParseIntFrom<1, kMaxArraySizeLimit>, &C::max_array_size>},
    {"DefaultQOS", &Set<G, &ParseDefaultQos, &C::default_qos>},
    {"Include",
     [](const conf::Word& word, G& line, Diagnostics& /*diagnostics*/) {
       line.include(word);  // reports its own errors; the rest of the line still counts
       return true;
     }},
    {"PriorityType", &Set<G, &ParsePolicyOf<Seam::kQueueOrder>, &C::plugins, &P::queue_order>},
    {"AdmissionPlugins", &Set<G, &ParsePolicyListOf<Seam::kAdmission>, &C::plugins, &P::admission>},
    {"NodeFilterPlugins",
     &Set<G, &ParsePolicyListOf<Seam::kNodeFilter>, &C::plugins, &P::node_filter>},
    {"NodeScoreType", &Set<G, &ParsePolicyOf<Seam::kNodeScore>, &C::plugins, &P::node_score>},
    {"DomainScoreType", &Set<G, &ParsePolicyOf<Seam::kDomainScore>, &C::plugins, &P::domain_score>},
});
constexpr auto kGlobalRows =
    Concat(kDaemonAndPriorityRows,
           PreemptionRows<G, &C::preempt_mode, &C::preempt_grace_time, &C::preempt_signal>(
               "PreemptGraceTime"),
           kSchedulingRows);

constexpr std::array<std::string_view, 4> kLineKeys = {"NodeName", "PartitionName", "QOSName",
                                                       "AccountName"};

using N = NodeLine;
constexpr auto kNodeRows = std::to_array<KeyRow<N>>({
    {"CPUs", &Set<N, &ParsePositiveInt, &NodeSpec::cpus>},
    {"MemoryMB", &Set<N, &ParsePositiveInt64, &NodeSpec::memory_mb>},
    {"RealMemory", &Set<N, &ParsePositiveInt64, &NodeSpec::memory_mb>},  // Slurm's name
    {"Gpus", &Set<N, &ParseGpuCount, &NodeSpec::gpus>},
    {"GpuNuma",
     [](const conf::Word& word, N& line, Diagnostics& diagnostics) {
       // The count is checked against Gpus= once the whole line is read.
       line.gpu_numa_word = &word;
       return ParseGpuNuma(word, line.target.gpu_numa, diagnostics);
     }},
    {"Features", &Set<N, &ParseCommaList, &NodeSpec::features>},
    {"Sockets", &Set<N, &ParseShapeCount, &NodeSpec::sockets>},
    {"CoresPerSocket", &Set<N, &ParseShapeCount, &NodeSpec::cores_per_socket>},
    {"ThreadsPerCore", &Set<N, &ParseShapeCount, &NodeSpec::threads_per_core>},
});

using S = PartitionSpec;
constexpr auto kPartitionOwnRows = std::to_array<KeyRow<PartitionLine>>({
    {"Nodes",
     [](const conf::Word& word, PartitionLine& line, Diagnostics& diagnostics) {
       // ALL is resolved once every node is known, included files too.
       line.all_nodes = EqualsIgnoreCase(word.value, "ALL");
       if (line.all_nodes) {
         line.target.nodes.clear();
         return true;
       }
       std::vector<std::string> names;
       if (!conf::ExpandHostlistValue(word, names, diagnostics)) return false;
       line.target.nodes = std::move(names);
       line.nodes_at = word.value_at;
       return true;
     }},
    {"Default", &Set<PartitionLine, &conf::ParseYesNo, &S::is_default>},
    {"MaxTime", &Set<PartitionLine, &ParseTime, &S::max_time>},
    {"DefaultTime", &Set<PartitionLine, &ParseTime, &S::default_time>},
    {"MaxNodes", &Set<PartitionLine, &ParseNodeLimit, &S::max_nodes>},
    {"PriorityTier", &Set<PartitionLine, &ParseNonNegativeInt, &S::priority_tier>},
    {"AllowAccounts", &Set<PartitionLine, &ParseListOrAll, &S::allow_accounts>},
    {"AllowUsers", &Set<PartitionLine, &ParseListOrAll, &S::allow_users>},
});
constexpr auto kPartitionRows =
    Concat(kPartitionOwnRows,
           PreemptionRows<PartitionLine, &S::preempt_mode, &S::grace_time, &S::preempt_signal>(
               "GraceTime"));

using Q = QosSpec;
constexpr auto kQosOwnRows = std::to_array<KeyRow<QosLine>>({
    {"Priority", &Set<QosLine, &ParseIntFrom<0, kMaxCount>, &Q::priority>},
    {"MaxJobsPerUser", &Set<QosLine, &ParseCountLimit, &Q::max_jobs_per_user>},
    {"MaxSubmitJobsPerUser", &Set<QosLine, &ParseCountLimit, &Q::max_submit_jobs_per_user>},
    {"MaxGpusPerUser", &Set<QosLine, &ParseCountLimit, &Q::max_gpus_per_user>},
    {"MaxGpusPerAccount", &Set<QosLine, &ParseCountLimit, &Q::max_gpus_per_account>},
    {"MaxWall", &Set<QosLine, &ParseMaxWall, &Q::max_wall>},
    {"Preempt",
     [](const conf::Word& word, QosLine& line, Diagnostics& /*diagnostics*/) {
       // The names are checked once every QOS is known.
       line.target.preempt = conf::SplitCommas(word.value);
       line.preempt_at = word.value_at;
       return true;
     }},
});
constexpr auto kQosRows = Concat(
    kQosOwnRows,
    PreemptionRows<QosLine, &Q::preempt_mode, &Q::grace_time, &Q::preempt_signal>("GraceTime"));

constexpr auto kAccountRows = std::to_array<KeyRow<AccountLine>>({
    {"Shares", &Set<AccountLine, &ParseIntFrom<1, kMaxCount>, &AccountSpec::shares>},
    {"UserShares", &Set<AccountLine, &ParseUserShares, &AccountSpec::user_shares>},
});

// Every row has a key and a parser: a row left empty would match no word
// and give the hints an empty key.
template <typename Line, std::size_t kSize>
constexpr bool AllFilled(const std::array<KeyRow<Line>, kSize>& rows) {
  return std::all_of(rows.begin(), rows.end(), [](const KeyRow<Line>& row) {
    return !row.key.empty() && row.parse != nullptr;
  });
}
static_assert(AllFilled(kGlobalRows));
static_assert(AllFilled(kNodeRows));
static_assert(AllFilled(kPartitionRows));
static_assert(AllFilled(kQosRows));
static_assert(AllFilled(kAccountRows));

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Shorter keys first, then case-insensitive: most steps of a search are
// decided by the length alone, as EqualsIgnoreCase decides most mismatches.
bool KeyLess(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char x = AsciiLower(a[i]);
    const char y = AsciiLower(b[i]);
    if (x != y) return x < y;
  }
  return false;
}

}  // namespace

template <typename Line>
KeyTable<Line>::KeyTable(std::string_view head, std::string_view context,
                         std::span<const KeyRow<Line>> rows,
                         std::span<const std::string_view> also_hinted)
    : context_(context), rows_(rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    by_key_.push_back(static_cast<std::uint8_t>(i));
    keys_.push_back(rows[i].key);
  }
  std::sort(by_key_.begin(), by_key_.end(), [&](std::uint8_t a, std::uint8_t b) {
    return KeyLess(rows[a].key, rows[b].key);
  });
  if (!head.empty()) keys_.push_back(head);
  hinted_ = keys_;
  hinted_.insert(hinted_.end(), also_hinted.begin(), also_hinted.end());
}

template <typename Line>
const KeyRow<Line>* KeyTable<Line>::Find(std::string_view key) const {
  const auto it = std::lower_bound(
      by_key_.begin(), by_key_.end(), key,
      [&](std::uint8_t row, std::string_view k) { return KeyLess(rows_[row].key, k); });
  if (it == by_key_.end() || !EqualsIgnoreCase(rows_[*it].key, key)) return nullptr;
  return &rows_[*it];
}

template <typename Line>
bool KeyTable<Line>::ParseWords(const conf::Line& line, Line& state,
                                Diagnostics& diagnostics) const {
  bool ok = true;
  for (std::size_t i = 1; i < line.words.size(); ++i) {
    const conf::Word& word = line.words[i];
    if (const KeyRow<Line>* row = Find(word.key); row != nullptr) {
      ok &= row->parse(word, state, diagnostics);
    } else {
      ReportUnknown(word, diagnostics);
      ok = false;
    }
  }
  return ok;
}

template <typename Line>
void KeyTable<Line>::ReportUnknown(const conf::Word& word, Diagnostics& diagnostics) const {
  conf::ReportUnknownKey(word, context_, hinted_, diagnostics);
}

template class KeyTable<GlobalLine>;
template class KeyTable<NodeLine>;
template class KeyTable<PartitionLine>;
template class KeyTable<QosLine>;
template class KeyTable<AccountLine>;

const KeyTable<GlobalLine>& GlobalKeys() {
  // A mistyped line key is a global key as far as the lexer can tell.
  static const KeyTable<GlobalLine> table("", "in cohort.conf", kGlobalRows, kLineKeys);
  return table;
}

const KeyTable<NodeLine>& NodeKeys() {
  static const KeyTable<NodeLine> table("NodeName", "in a NodeName line", kNodeRows);
  return table;
}

const KeyTable<PartitionLine>& PartitionKeys() {
  static const KeyTable<PartitionLine> table("PartitionName", "in a PartitionName line",
                                             kPartitionRows);
  return table;
}

const KeyTable<QosLine>& QosKeys() {
  static const KeyTable<QosLine> table("QOSName", "in a QOSName line", kQosRows);
  return table;
}

const KeyTable<AccountLine>& AccountKeys() {
  static const KeyTable<AccountLine> table("AccountName", "in an AccountName line", kAccountRows);
  return table;
}

bool IsLineKey(std::string_view key) {
  return std::any_of(kLineKeys.begin(), kLineKeys.end(),
                     [&](std::string_view line_key) { return EqualsIgnoreCase(key, line_key); });
}

std::span<const std::string_view> KnownKeys(LineKind kind) {
  switch (kind) {
    case LineKind::kGlobal:
      return GlobalKeys().Keys();
    case LineKind::kNode:
      return NodeKeys().Keys();
    case LineKind::kPartition:
      return PartitionKeys().Keys();
    case LineKind::kQos:
      return QosKeys().Keys();
    case LineKind::kAccount:
      return AccountKeys().Keys();
  }
  return {};
}

}  // namespace cohort::config
