// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "config/config_tables.h"
#include "config/config_values.h"

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
constexpr std::array<conf::KeyRow<Line>, 3> PreemptionRows(std::string_view grace_key) {
  return {{{"PreemptMode", &conf::Set<Line, &ParsePreemptMode, kMode>},
           {grace_key, &conf::Set<Line, &ParseGraceTime, kGrace>},
           {"PreemptSignal", &conf::Set<Line, &ParseSignal, kSignal>}}};
}

using G = GlobalLine;

// A path key: relative to the folder of the file that sets it.
template <auto kField>
bool SetPath(const conf::Word& word, G& line, Diagnostics& /*diagnostics*/) {
  line.target.*kField = ResolvePath(line.file, word.value);
  return true;
}

// JobSubmitPlugins=lua, as Slurm's job_submit/lua: the script beside the
// file unless JobSubmitScript= names one. Slurm's other plugins are rules
// a script states.
bool SetJobSubmitPlugins(const conf::Word& word, G& line, Diagnostics& diagnostics) {
  bool lua = false;
  for (const std::string& plugin : conf::SplitCommas(word.value)) {
    if (EqualsIgnoreCase(plugin, "lua") || EqualsIgnoreCase(plugin, "job_submit/lua")) {
      lua = true;
    } else {
      diagnostics.Error(
          word.value_at,
          fmt::format("{}={}: Cohort has no job submit plugin {}", word.key, word.value, plugin),
          "write JobSubmitPlugins=lua and state the rule in job_submit.lua "
          "(docs/operations.md, \"A site policy for submissions\")");
      return false;
    }
  }
  if (lua && line.target.job_submit_script.empty()) {
    line.target.job_submit_script = ResolvePath(line.file, "job_submit.lua");
  }
  if (!lua) line.target.job_submit_script.clear();
  return true;
}

bool SetControllerAddr(const conf::Word& word, G& line, Diagnostics& diagnostics) {
  return ParseControllerAddr(word, line.target, diagnostics);
}

using C = ClusterConfig;
using W = PriorityWeights;
using P = PluginChoice;
constexpr auto kDaemonAndPriorityRows = std::to_array<conf::KeyRow<G>>({
    {"ClusterName", &conf::Set<G, &ParseText, &C::cluster_name>},
    {"ControllerAddr", &SetControllerAddr},
    {"ControllerTimeout", &conf::Set<G, &ParsePositiveSeconds, &C::controller_timeout>},
    {"ControllerPort", &conf::Set<G, &ParsePort, &C::controller_port>},
    {"HttpPort", &conf::Set<G, &ParsePort, &C::http_port>},
    {"LogFile", &SetPath<&C::log_file>},
    {"TokenKeyFile", &SetPath<&C::token_key_file>},
    {"StateDir", &conf::Set<G, &ParseText, &C::state_dir>},
    {"AuthKeyFile", &SetPath<&C::auth_key_file>},
    {"AuthType", &conf::Set<G, &ParseAuthType, &C::auth_type>},
    {"AuthInfo", &conf::Set<G, &ParseAuthInfo, &C::munge_socket>},
    {"CohortUser", &conf::Set<G, &ParseText, &C::cohort_user>},
    {"Operators", &conf::Set<G, &ParseCommaList, &C::operators>},
    {"PrivateData", &conf::Set<G, &ParsePrivateData, &C::private_data>},
    {"TLSCertFile", &SetPath<&C::tls_cert_file>},
    {"TLSKeyFile", &SetPath<&C::tls_key_file>},
    {"TLSCAFile", &SetPath<&C::tls_ca_file>},
    {"AgentCertFile", &SetPath<&C::agent_cert_file>},
    {"AgentKeyFile", &SetPath<&C::agent_key_file>},
    {"TopologyFile", &SetPath<&C::topology_file>},
    {"NodeTimeout", &conf::Set<G, &ParsePositiveSeconds, &C::node_timeout>},
    {"HealthCheckProgram", &SetPath<&C::health_check_program>},
    {"Prolog", &SetPath<&C::prolog>},
    {"Epilog", &SetPath<&C::epilog>},
    {"JobSubmitPlugins", &SetJobSubmitPlugins},
    {"JobSubmitScript", &SetPath<&C::job_submit_script>},
    {"PrologEpilogTimeout", &conf::Set<G, &ParsePositiveSeconds, &C::prolog_epilog_timeout>},
    {"HealthCheckInterval", &conf::Set<G, &ParsePositiveSeconds, &C::health_check_interval>},
    {"MetricsJobSeries", &conf::Set<G, &ParseIntFrom<0, 100000>, &C::metrics_job_series>},
    {"JobAcctGatherFrequency", &conf::Set<G, &ParseGatherFrequency, &C::job_acct_gather_frequency>},
    {"KillWait", &conf::Set<G, &ParseNonNegativeSeconds, &C::kill_wait>},
    {"MaxBatchRequeue", &conf::Set<G, &ParseIntFrom<0, C::kMaxRestarts>, &C::max_batch_requeue>},
    {"RequeueBackoff", &conf::Set<G, &ParseRequeueBackoff, &C::requeue_backoff>},
    {"MpiDefault", &conf::Set<G, &ParseMpiType, &C::mpi_default>},
    {"SwitchType", &conf::Set<G, &ParseSwitchType, &C::switch_type>},
    {"TopologyBlocks", &conf::Set<G, &ParseTopologyBlocks, &C::topology_blocks>},
    {"SwitchParameters", &conf::Set<G, &ParseSwitchParameters, &C::imex>},
    {"ContainerRuntime", &conf::Set<G, &ParseContainerRuntime, &C::container_runtime>},
    {"ContainerCacheDir", &SetPath<&C::container_cache_dir>},
    {"ContainerCacheMaxGB", &conf::Set<G, &ParseIntFrom<0, 1 << 20>, &C::container_cache_max_gb>},
    {"ContainerRegistryCAFile", &SetPath<&C::container_registry_ca_file>},
    {"ContainerCredentialsFile", &SetPath<&C::container_credentials_file>},
    {"ContainerHooksDir", &SetPath<&C::container_hooks_dir>},
    {"ContainerPullAhead", &conf::Set<G, &ParseFiniteTime, &C::container_pull_ahead>},
    {"ContainerRegistryMirrors",
     &conf::Set<G, &ParseRegistryMirrors, &C::container_registry_mirrors>},
    {"StateSync", &conf::Set<G, &ParseStateSync, &C::state_sync>},
    {"StateBackend", &conf::Set<G, &ParseStateBackend, &C::state_backend>},
    {"StateDatabase", &conf::Set<G, &ParseText, &C::state_database>},
    {"HistoryDays", &conf::Set<G, &ParseHistoryDays, &C::history_days>},
    {"PriorityWeightAge", &conf::Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::age>},
    {"PriorityWeightFairshare",
     &conf::Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::fairshare>},
    {"PriorityWeightJobSize",
     &conf::Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::job_size>},
    {"PriorityWeightPartition",
     &conf::Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::partition>},
    {"PriorityWeightQOS", &conf::Set<G, &ParseIntFrom<0, kMaxCount>, &C::priority, &W::qos>},
    {"PriorityMaxAge", &conf::Set<G, &ParseMaxAge, &C::priority, &W::max_age>},
    {"PriorityDecayHalfLife", &conf::Set<G, &ParseHalfLife, &C::priority, &W::decay_half_life>},
    {"PriorityFavorSmall", &conf::Set<G, &conf::ParseYesNo, &C::priority, &W::favor_small>},
});
constexpr auto kSchedulingRows = std::to_array<conf::KeyRow<G>>({
    {"PreemptExemptTime", &conf::Set<G, &ParseFiniteTime, &C::preempt_exempt_time>},
    {"BackfillDepth", &conf::Set<G, &ParseIntFrom<1, kMaxBackfillDepth>, &C::backfill_depth>},
    {"MaxArraySize", &conf::Set<G, &ParseIntFrom<1, kMaxArraySizeLimit>, &C::max_array_size>},
    {"DefaultQOS", &conf::Set<G, &ParseDefaultQos, &C::default_qos>},
    {"PriorityUsageResetPeriod", &conf::Set<G, &ParseUsageReset, &C::usage_reset_period>},
    {"Include",
     [](const conf::Word& word, G& line, Diagnostics& /*diagnostics*/) {
       line.include(word);  // reports its own errors; the rest of the line still counts
       return true;
     }},
    {"PriorityType", &conf::Set<G, &ParsePolicyOf<Seam::kQueueOrder>, &C::plugins, &P::queue_order>},
    {"AdmissionPlugins", &conf::Set<G, &ParsePolicyListOf<Seam::kAdmission>, &C::plugins, &P::admission>},
    {"NodeFilterPlugins",
     &conf::Set<G, &ParsePolicyListOf<Seam::kNodeFilter>, &C::plugins, &P::node_filter>},
    {"NodeScoreType", &conf::Set<G, &ParsePolicyOf<Seam::kNodeScore>, &C::plugins, &P::node_score>},
    {"DomainScoreType", &conf::Set<G, &ParsePolicyOf<Seam::kDomainScore>, &C::plugins, &P::domain_score>},
});
constexpr auto kGlobalRows =
    Concat(kDaemonAndPriorityRows,
           PreemptionRows<G, &C::preempt_mode, &C::preempt_grace_time, &C::preempt_signal>(
               "PreemptGraceTime"),
           kSchedulingRows);

constexpr std::array<std::string_view, 4> kLineKeys = {"NodeName", "PartitionName", "QOSName",
                                                       "AccountName"};

using N = NodeLine;
constexpr auto kNodeRows = std::to_array<conf::KeyRow<N>>({
    {"CPUs", &conf::Set<N, &ParsePositiveInt, &NodeSpec::cpus>},
    {"MemoryMB", &conf::Set<N, &ParsePositiveInt64, &NodeSpec::memory_mb>},
    {"RealMemory", &conf::Set<N, &ParsePositiveInt64, &NodeSpec::memory_mb>},  // Slurm's name
    {"Gpus",
     [](const conf::Word& word, N& line, Diagnostics& diagnostics) {
       line.gpus_word = &word;
       return ParseGpuCount(word, line.target.gpus, diagnostics);
     }},
    {"Gres",
     [](const conf::Word& word, N& line, Diagnostics& diagnostics) {
       // Checked against Gpus= once the whole line is read.
       line.gres_word = &word;
       return ParseNodeGres(word, line.gres_gpus, line.target.gpu_type, diagnostics);
     }},
    {"GpuNuma",
     [](const conf::Word& word, N& line, Diagnostics& diagnostics) {
       // The count is checked against Gpus= once the whole line is read.
       line.gpu_numa_word = &word;
       return ParseGpuNuma(word, line.target.gpu_numa, diagnostics);
     }},
    {"GpuFiles",
     [](const conf::Word& word, N& line, Diagnostics& diagnostics) {
       // The count is checked against Gpus= once the whole line is read.
       line.gpu_files_word = &word;
       line.target.gpu_files.clear();
       if (word.value.empty()) return true;  // the default, overriding a DEFAULT line
       if (!conf::ExpandHostlistValue(word, line.target.gpu_files, diagnostics)) return false;
       for (const std::string& file : line.target.gpu_files) {
         if (file.starts_with('/')) continue;
         diagnostics.Error(word.value_at,
                           fmt::format("GpuFiles: \"{}\" is not an absolute path", file),
                           "name each GPU's device file, in GPU order: "
                           "GpuFiles=/dev/nvidia[0-7]");
         return false;
       }
       return true;
     }},
    {"Features", &conf::Set<N, &ParseCommaList, &NodeSpec::features>},
    {"Sockets", &conf::Set<N, &ParseShapeCount, &NodeSpec::sockets>},
    {"CoresPerSocket", &conf::Set<N, &ParseShapeCount, &NodeSpec::cores_per_socket>},
    {"ThreadsPerCore", &conf::Set<N, &ParseShapeCount, &NodeSpec::threads_per_core>},
});

using S = PartitionSpec;
constexpr auto kPartitionOwnRows = std::to_array<conf::KeyRow<PartitionLine>>({
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
    {"Default", &conf::Set<PartitionLine, &conf::ParseYesNo, &S::is_default>},
    {"MaxTime", &conf::Set<PartitionLine, &ParseTime, &S::max_time>},
    {"DefaultTime", &conf::Set<PartitionLine, &ParseTime, &S::default_time>},
    {"MaxNodes", &conf::Set<PartitionLine, &ParseNodeLimit, &S::max_nodes>},
    {"PriorityTier", &conf::Set<PartitionLine, &ParseNonNegativeInt, &S::priority_tier>},
    {"AllowAccounts", &conf::Set<PartitionLine, &ParseListOrAll, &S::allow_accounts>},
    {"AllowUsers", &conf::Set<PartitionLine, &ParseListOrAll, &S::allow_users>},
    {"AllowQos", &conf::Set<PartitionLine, &ParseListOrAll, &S::allow_qos>},
    {"State", &conf::Set<PartitionLine, &ParsePartitionState, &S::state>},
});
constexpr auto kPartitionRows =
    Concat(kPartitionOwnRows,
           PreemptionRows<PartitionLine, &S::preempt_mode, &S::grace_time, &S::preempt_signal>(
               "GraceTime"));

using Q = QosSpec;
constexpr auto
    kQosOwnRows =
        std::to_array<conf::KeyRow<QosLine>>(
            {
                {"Priority", &conf::Set<QosLine, &ParseIntFrom<0, kMaxCount>, &Q::priority>},
                {"MaxJobsPerUser", &conf::Set<QosLine, &ParseCountLimit, &Q::max_jobs_per_user>},
                {"MaxSubmitJobsPerUser",
                 &conf::Set<QosLine, &ParseCountLimit, &Q::max_submit_jobs_per_user>},
                {"MaxGpusPerUser", &conf::Set<QosLine, &ParseCountLimit, &Q::max_gpus_per_user>},
                {"MaxGpusPerAccount",
                 &conf::Set<QosLine, &ParseCountLimit, &Q::max_gpus_per_account>},
                {"MaxWall", &conf::Set<QosLine, &ParseMaxWall, &Q::max_wall>},
                {"Preempt",
                 [](const conf::Word& word, QosLine& line, Diagnostics& /*diagnostics*/) {
                   // The names are checked once every QOS is known.
                   line.target.preempt = conf::SplitCommas(word.value);
                   line.preempt_at = word.value_at;
                   return true;
                 }},
                {"AllowAccounts", &conf::Set<QosLine, &ParseListOrAll, &Q::allow_accounts>},
                {"AllowUsers", &conf::Set<QosLine, &ParseListOrAll, &Q::allow_users>},
                {"GrpTRES", &conf::Set<QosLine, &ParseAccountLimit, &Q::limits>},
                {"GrpTRESMins", &conf::Set<QosLine, &ParseAccountLimit, &Q::limits>},
                {"GrpJobs", &conf::Set<QosLine, &ParseAccountLimit, &Q::limits>},
                {"MaxTRESPerJob", &conf::Set<QosLine, &ParseAccountLimit, &Q::limits>},
                {"Description", &conf::Set<QosLine, &ParseText, &Q::description>},
            });
constexpr auto kQosRows = Concat(
    kQosOwnRows,
    PreemptionRows<QosLine, &Q::preempt_mode, &Q::grace_time, &Q::preempt_signal>("GraceTime"));

using A = AccountSpec;
constexpr auto kAccountRows = std::to_array<conf::KeyRow<AccountLine>>({
    {"Parent", &conf::Set<AccountLine, &ParseText, &A::parent>},
    {"Shares", &conf::Set<AccountLine, &ParseIntFrom<1, kMaxCount>, &A::shares>},
    {"UserShares", &conf::Set<AccountLine, &ParseUserShares, &A::user_shares>},
    {"Users", &conf::Set<AccountLine, &ParseCommaList, &A::users>},
    {"Description", &conf::Set<AccountLine, &ParseText, &A::description>},
    {"Organization", &conf::Set<AccountLine, &ParseText, &A::organization>},
    {"GrpTRES", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"GrpTRESMins", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"GrpJobs", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"MaxJobs", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"MaxSubmitJobs", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"MaxTRESPerJob", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"QOS", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
    {"DefaultQOS", &conf::Set<AccountLine, &ParseAccountLimit, &A::limits>},
});

static_assert(conf::AllFilled(kGlobalRows));
static_assert(conf::AllFilled(kNodeRows));
static_assert(conf::AllFilled(kPartitionRows));
static_assert(conf::AllFilled(kQosRows));
static_assert(conf::AllFilled(kAccountRows));

}  // namespace

const conf::KeyTable<GlobalLine>& GlobalKeys() {
  // A mistyped line key is a global key as far as the lexer can tell.
  static const conf::KeyTable<GlobalLine> table("", "in cohort.conf", kGlobalRows, kLineKeys);
  return table;
}

const conf::KeyTable<NodeLine>& NodeKeys() {
  static const conf::KeyTable<NodeLine> table("NodeName", "in a NodeName line", kNodeRows);
  return table;
}

const conf::KeyTable<PartitionLine>& PartitionKeys() {
  static const conf::KeyTable<PartitionLine> table("PartitionName", "in a PartitionName line",
                                                   kPartitionRows);
  return table;
}

absl::Status SetQosKey(std::string_view key, std::string_view value, QosSpec& qos) {
  const conf::KeyRow<QosLine>* row = QosKeys().Find(key);
  const conf::Word word{
      .key = std::string(key), .value = std::string(value), .key_at = {}, .value_at = {}};
  Diagnostics diagnostics;
  if (row == nullptr) {
    QosKeys().ReportUnknown(word, diagnostics);
  } else {
    QosLine line{.target = qos, .preempt_at = {}};
    if (row->parse(word, line, diagnostics) && !diagnostics.HasErrors()) {
      qos = std::move(line.target);
      return absl::OkStatus();
    }
  }
  std::string message;
  for (const Diagnostic& d : diagnostics.All()) {
    if (!message.empty()) message += "; ";
    message += d.hint.empty() ? d.message : fmt::format("{}: {}", d.message, d.hint);
  }
  return absl::InvalidArgumentError(message.empty() ? fmt::format("{}: not set", key) : message);
}

const conf::KeyTable<QosLine>& QosKeys() {
  static const conf::KeyTable<QosLine> table("QOSName", "in a QOSName line", kQosRows);
  return table;
}

const conf::KeyTable<AccountLine>& AccountKeys() {
  static const conf::KeyTable<AccountLine> table("AccountName", "in an AccountName line",
                                                 kAccountRows);
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
