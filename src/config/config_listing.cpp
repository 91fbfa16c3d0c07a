// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/config_listing.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cohort/config/account_limits.h"
#include "cohort/text/slurm_time.h"

namespace cohort::config {
namespace {

std::string OrNull(const std::string& text) { return text.empty() ? "(null)" : text; }

std::string Seconds(std::chrono::seconds s) { return fmt::format("{} sec", s.count()); }

std::string List(const std::vector<std::string>& items) {
  return items.empty() ? "(null)" : fmt::format("{}", fmt::join(items, ","));
}

}  // namespace

std::vector<ConfigLine> ListConfig(const ClusterConfig& config, std::int64_t finished_kept_s) {
  const std::vector<std::string> controllers =
      config.controller_addrs.empty() ? std::vector<std::string>{config.controller_addr}
                                      : config.controller_addrs;
  const PriorityWeights& w = config.priority;
  std::vector<ConfigLine> lines = {
      {"AdmissionPlugins", List(config.plugins.admission)},
      {"AuthType", config.auth_type == AuthType::kNone ? "auth/none" : "auth/munge"},
      {"ClusterName", config.cluster_name},
      {"ContainerCacheDir", OrNull(config.container_cache_dir)},
      {"ContainerCacheMaxGB", std::to_string(config.container_cache_max_gb)},
      {"ContainerPullAhead", Seconds(config.container_pull_ahead)},
      {"ContainerRuntime", config.container_runtime},
      {"DefaultQOS", config.default_qos},
      {"DomainScoreType", config.plugins.domain_score},
      {"Epilog", OrNull(config.epilog)},
      {"HealthCheckInterval", std::to_string(config.health_check_interval.count())},
      {"HealthCheckProgram", OrNull(config.health_check_program)},
      {"HistoryDays", std::to_string(config.history_days)},
      {"JobAcctGatherFrequency", fmt::format("task={}", config.job_acct_gather_frequency.count())},
      {"JobSubmitPlugins", config.job_submit_script.empty() ? "(null)" : "lua"},
      {"KillWait", Seconds(config.kill_wait)},
      {"MaxArraySize", std::to_string(config.max_array_size)},
      {"MaxBatchRequeue", std::to_string(config.max_batch_requeue)},
      {"MinJobAge", Seconds(std::chrono::seconds(finished_kept_s))},
      {"MpiDefault", config.mpi_default},
      {"NodeFilterPlugins", List(config.plugins.node_filter)},
      {"NodeScoreType", config.plugins.node_score},
      {"Operators", List(config.operators)},
      {"PreemptExemptTime", Seconds(config.preempt_exempt_time)},
      {"PreemptGraceTime", Seconds(config.preempt_grace_time)},
      {"PreemptMode", std::string(PreemptModeName(config.preempt_mode))},
      {"PriorityDecayHalfLife", FormatSlurmTime(w.decay_half_life)},
      {"PriorityFavorSmall", w.favor_small ? "Yes" : "No"},
      {"PriorityMaxAge", FormatSlurmTime(w.max_age)},
      {"PriorityType", config.plugins.queue_order},
      {"PriorityUsageResetPeriod", std::string(UsageResetPeriodName(config.usage_reset_period))},
      {"PriorityWeightAge", std::to_string(w.age)},
      {"PriorityWeightFairshare", std::to_string(w.fairshare)},
      {"PriorityWeightJobSize", std::to_string(w.job_size)},
      {"PriorityWeightPartition", std::to_string(w.partition)},
      {"PriorityWeightQOS", std::to_string(w.qos)},
      {"Prolog", OrNull(config.prolog)},
      {"PrologEpilogTimeout", Seconds(config.prolog_epilog_timeout)},
      {"RequeueBackoff", Seconds(config.requeue_backoff)},
      {"SchedulerParameters", fmt::format("bf_max_job_test={}", config.backfill_depth)},
      {"SchedulerType", "sched/backfill"},
      {"SelectType", "select/cons_tres"},
      {"SlurmctldHost", List(controllers)},
      {"SlurmctldPort", std::to_string(config.controller_port)},
      {"SlurmctldTimeout", Seconds(config.controller_timeout)},
      {"SlurmdTimeout", Seconds(config.node_timeout)},
      {"SlurmUser", config.cohort_user},
      {"StateBackend", config.state_backend},
      {"StateSaveLocation", config.state_dir},
      {"StateSync", config.state_sync},
      {"SwitchType", config.switch_type == "none" ? "(null)" : "switch/" + config.switch_type},
      {"TLS", config.TlsOn() ? "yes" : "no"},
      {"TopologyBlocks", config.topology_blocks},
      {"TopologyFile", OrNull(config.topology_file)},
      {"TopologyPlugin", config.topology_file.empty() ? "topology/flat" : "topology/tree"},
  };
  std::ranges::sort(lines, {}, &ConfigLine::name);
  return lines;
}

}  // namespace cohort::config
