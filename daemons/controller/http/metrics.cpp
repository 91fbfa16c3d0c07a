// SPDX-License-Identifier: Apache-2.0
#include "http/metrics.h"

#include <bit>
#include <tuple>

#include "controller_state.h"

namespace cohort::controller {
namespace {

using metrics::Exposition;
using metrics::Labels;
using metrics::MetricType;

// The partition a job runs in: its own, or the default one.
std::string PartitionOf(const Job& job, const config::ClusterConfig& config) {
  if (!job.request.partition.empty()) return job.request.partition;
  for (const config::PartitionSpec& partition : config.partitions) {
    if (partition.is_default) return partition.name;
  }
  return config.partitions.empty() ? std::string() : config.partitions.front().name;
}

void Counter(Exposition& out, std::string_view name, std::string_view help, std::string_view label,
             const std::map<std::string, std::uint64_t, std::less<>>& counts) {
  out.Family(name, MetricType::kCounter, help);
  for (const auto& [value, count] : counts) {
    out.Sample(name, {{label, value}}, static_cast<double>(count));
  }
}

void JobGauges(Exposition& out, const Engine& engine) {
  // (state, partition, reason) → jobs; finished jobs are history, not load.
  std::map<std::tuple<std::string, std::string, std::string>, int> jobs;
  for (const auto& [id, job] : engine.Jobs()) {
    if (IsFinished(job.state)) continue;
    const std::string reason = job.state == JobState::kPending
                                   ? std::string(PendingReasonName(job.wait.reason))
                                   : std::string();
    ++jobs[{std::string(JobStateName(job.state)), PartitionOf(job, engine.Config()), reason}];
  }
  out.Family("cohort_jobs", MetricType::kGauge,
             "Jobs not yet finished, by state, partition and (pending jobs) Slurm's reason.");
  for (const auto& [key, count] : jobs) {
    const auto& [state, partition, reason] = key;
    out.Sample("cohort_jobs", {{"state", state}, {"partition", partition}, {"reason", reason}},
               count);
  }
}

// What the running jobs sampled use, labelled by job, user, account and
// partition: the `most` holding the most GPUs (then the oldest), so that a
// cluster of many small jobs does not grow the scrape without bound.
void JobUsageGauges(Exposition& out, const Engine& engine, const UsageBook& usage, int most) {
  struct Sampled {
    const Job* job;
    v1::LiveUsage now;
  };
  std::vector<Sampled> sampled;
  for (const JobId id : usage.Jobs()) {
    const Job* job = engine.FindJob(id);
    std::optional<v1::LiveUsage> now = usage.Whole(id);
    if (job == nullptr || job->state != JobState::kRunning || !now) continue;
    sampled.push_back({job, *std::move(now)});
  }
  std::stable_sort(sampled.begin(), sampled.end(),
                   [](const Sampled& a, const Sampled& b) { return a.now.gpus() > b.now.gpus(); });
  const std::size_t shown = std::min(sampled.size(), static_cast<std::size_t>(std::max(most, 0)));
  out.Family("cohort_job_usage_series_omitted", MetricType::kGauge,
             "Running jobs sampled but left out of the cohort_job_* series (MetricsJobSeries= "
             "bounds them; those holding the most GPUs are shown).");
  out.Sample("cohort_job_usage_series_omitted", {}, static_cast<double>(sampled.size() - shown));
  const auto labels = [&](const Job& job) -> Labels {
    return {{"job", DisplayId(job)},
            {"user", job.request.user_name},
            {"account", job.request.account},
            {"partition", PartitionOf(job, engine.Config())}};
  };
  const double now_ms = static_cast<double>(ControllerState::Now().count());
  for (const auto& [name, help, value] :
       {std::tuple{
            "cohort_job_cpu_seconds",
            "CPU time of a running job's live ranks and what they reaped, at the last "
            "sample.",
            +[](const v1::LiveUsage&u, double) { return static_cast<double>(u.cpu_ms()) / 1e3; }},
        std::tuple{
            "cohort_job_memory_rss_bytes", "Resident memory of a running job's ranks.",
            +[](const v1::LiveUsage&u, double) { return static_cast<double>(u.rss_kb()) * 1024; }},
        std::tuple{"cohort_job_gpus", "GPUs a running job holds on the nodes that sampled it.",
                   +[](const v1::LiveUsage&u, double) { return static_cast<double>(u.gpus()); }},
        std::tuple{"cohort_job_gpu_utilization_ratio",
                   "Utilization of a running job's GPUs, averaged (NVML; absent where "
                   "unmeasured).",
                   +[](const v1::LiveUsage&u, double) {
                     return u.gpu_measured() ? u.gpu_util_pct() / 100.0 : -1.0;
                   }},
        std::tuple{"cohort_job_gpu_memory_used_bytes",
                   "Memory in use on a running job's GPUs, together (NVML).",
                   +[](const v1::LiveUsage&u, double) {
                     return u.gpu_measured() ? static_cast<double>(u.gpu_mem_mb()) * 1048576 : -1.0;
                   }},
        std::tuple{"cohort_job_gpus_idle_seconds",
                   "How long every GPU of a running job has been under 5% busy; 0 while any "
                   "is busier.",
                   +[](const v1::LiveUsage&u, double now) {
                     if (!u.gpu_measured()) return -1.0;
                     return u.gpu_idle_since_ms() == 0
                                ? 0.0
                                : std::max(now - static_cast<double>(u.gpu_idle_since_ms()), 0.0) /
                                      1e3;
                   }}}) {
    out.Family(name, MetricType::kGauge, help);
    for (std::size_t i = 0; i < shown; ++i) {
      const double v = value(sampled[i].now, now_ms);
      if (v >= 0) out.Sample(name, labels(*sampled[i].job), v);
    }
  }
}

void NodeGauges(Exposition& out, const Engine& engine) {
  const alloc::NodePool& pool = engine.Pool();
  const topology::Topology& topology = engine.GetTopology();
  std::map<std::pair<std::string, std::string>, int> nodes;  // (partition, state)
  std::map<std::pair<std::string, std::string>, int> gpus;   // (partition, state)
  for (int p = 0; p < pool.PartitionCount(); ++p) {
    const alloc::Partition& partition = pool.GetPartition(p);
    for (const topology::NodeId node : partition.nodes) {
      const int total = pool.Capacity(node).gpus;
      const int free = std::popcount(pool.Free(node).gpus);
      ++nodes[{partition.name, std::string(NodeStatusName(engine.ViewNode(node).status))}];
      gpus[{partition.name, "allocated"}] += total - free;
      gpus[{partition.name, "free"}] += free;
    }
  }
  out.Family("cohort_nodes", MetricType::kGauge, "Nodes by partition and state.");
  for (const auto& [key, count] : nodes) {
    out.Sample("cohort_nodes", {{"partition", key.first}, {"state", key.second}}, count);
  }
  out.Family("cohort_gpus", MetricType::kGauge, "GPUs by partition, allocated or free.");
  for (const auto& [key, count] : gpus) {
    out.Sample("cohort_gpus", {{"partition", key.first}, {"state", key.second}}, count);
  }
  out.Family("cohort_leaf_gpus", MetricType::kGauge,
             "GPUs under each leaf switch, allocated or free.");
  for (const topology::Switch& leaf : topology.Switches()) {
    if (leaf.level != 0) continue;
    int total = 0;
    int free = 0;
    for (const topology::NodeId node : leaf.nodes) {
      total += pool.Capacity(node).gpus;
      free += std::popcount(pool.Free(node).gpus);
    }
    out.Sample("cohort_leaf_gpus", {{"switch", leaf.name}, {"state", "allocated"}}, total - free);
    out.Sample("cohort_leaf_gpus", {{"switch", leaf.name}, {"state", "free"}}, free);
  }
}

// Observes `value` in the histogram of `key`, made with `bounds` on first use.
void ObserveKeyed(std::map<std::string, metrics::Histogram, std::less<>>& histograms,
                  std::string_view key, double value) {
  auto it = histograms.find(key);
  if (it == histograms.end()) {
    it = histograms.emplace(std::string(key), metrics::Histogram(metrics::DurationBounds())).first;
  }
  it->second.Observe(value);
}

// Bounds for how many things a commit carries: 1 to 4096, doubling.
std::vector<double> CountBounds() {
  std::vector<double> bounds;
  for (double b = 1; b <= 4096; b *= 2) bounds.push_back(b);
  return bounds;
}

double Seconds(std::chrono::steady_clock::duration took) {
  return std::chrono::duration<double>(took).count();
}

void Histograms(Exposition& out, std::string_view name, std::string_view label,
                const std::map<std::string, metrics::Histogram, std::less<>>& histograms) {
  for (const auto& [key, histogram] : histograms) histogram.Write(out, name, {{label, key}});
}

}  // namespace

ControllerMetrics::ControllerMetrics()
    : commit_seconds_(metrics::DurationBounds()),
      commit_records_(CountBounds()),
      commit_waiting_(CountBounds()) {}

void ControllerMetrics::Count(std::span<const JobTransition> transitions) {
  for (const JobTransition& t : transitions) {
    if (!t.from) {
      ++submitted_;
      continue;
    }
    if (t.from->state == JobState::kPending && t.to.state == JobState::kRunning) ++started_;
    if (IsFinished(t.to.state) && !IsFinished(t.from->state)) {
      ++ended_[std::string(JobStateName(t.to.state))];
    }
    if (t.event == JobEvent::kPreempted) ++preempted_["REQUEUE"];
    if (t.event == JobEvent::kSuspended) ++preempted_["SUSPEND"];
    if (t.event == JobEvent::kCancelled && t.from->sub == JobSubstate::kPreempting) {
      ++preempted_["CANCEL"];
    }
  }
}

void ControllerMetrics::Pass(std::string_view kind, std::chrono::steady_clock::duration took) {
  ObserveKeyed(passes_, kind, Seconds(took));
}

void ControllerMetrics::Rpc(std::string_view method, std::chrono::steady_clock::duration took) {
  ObserveKeyed(rpcs_, method, Seconds(took));
}

void ControllerMetrics::Commit(std::chrono::steady_clock::duration took, std::size_t records,
                               std::size_t waiting) {
  commit_seconds_.Observe(Seconds(took));
  commit_records_.Observe(static_cast<double>(records));
  commit_waiting_.Observe(static_cast<double>(waiting));
}

std::string ControllerMetrics::Render(const Engine& engine, std::size_t agent_streams,
                                      const Refusals& refusals, const UsageBook* usage,
                                      int job_series) const {
  Exposition out;
  JobGauges(out, engine);
  NodeGauges(out, engine);
  if (usage != nullptr) JobUsageGauges(out, engine, *usage, job_series);
  out.Family("cohort_jobs_submitted_total", MetricType::kCounter,
             "Jobs submitted (each array task split off counts too).");
  out.Sample("cohort_jobs_submitted_total", {}, static_cast<double>(submitted_));
  out.Family("cohort_jobs_started_total", MetricType::kCounter, "Jobs started (every attempt).");
  out.Sample("cohort_jobs_started_total", {}, static_cast<double>(started_));
  Counter(out, "cohort_jobs_ended_total", "Jobs ended, by final state.", "state", ended_);
  Counter(out, "cohort_preemptions_total", "Jobs preempted, by PreemptMode.", "mode", preempted_);
  out.Family("cohort_scheduling_pass_seconds", MetricType::kHistogram,
             "How long scheduling passes took, by kind: submission, release, full, "
             "release-full or idle (docs/scheduling.md).");
  Histograms(out, "cohort_scheduling_pass_seconds", "kind", passes_);
  out.Family("cohort_scheduling_pass_triggers_total", MetricType::kCounter,
             "What called for scheduling passes, by trigger: submitted and released call for "
             "submission and release passes, the others for a full pass (docs/scheduling.md).");
  for (const auto& [trigger, count] : engine.PassTriggerCounts()) {
    out.Sample("cohort_scheduling_pass_triggers_total", {{"trigger", std::string(trigger)}},
               static_cast<double>(count));
  }
  out.Family("cohort_rpc_seconds", MetricType::kHistogram,
             "How long calls of the Controller service took, from arrival to answer (the "
             "commit they waited for included), by method.");
  Histograms(out, "cohort_rpc_seconds", "method", rpcs_);
  out.Family("cohort_store_commit_seconds", MetricType::kHistogram,
             "How long commits of the state database took.");
  commit_seconds_.Write(out, "cohort_store_commit_seconds", {});
  out.Family("cohort_store_commit_records", MetricType::kHistogram,
             "Job and node records written per commit (the group commit's batch).");
  commit_records_.Write(out, "cohort_store_commit_records", {});
  out.Family("cohort_store_commit_waiting", MetricType::kHistogram,
             "Answers, agent commands and events that waited on each commit.");
  commit_waiting_.Write(out, "cohort_store_commit_waiting", {});
  out.Family("cohort_fairshare_usage", MetricType::kGauge,
             "Each account's decayed usage (resource-seconds) in fair share.");
  for (const policy::ShareRow& row : engine.Usage().Rows(engine.Config(), ControllerState::Now())) {
    if (!row.user.empty()) continue;
    out.Sample("cohort_fairshare_usage", {{"account", row.account}}, row.usage);
  }
  out.Family("cohort_agent_streams", MetricType::kGauge,
             "Nodes whose agent is connected to this controller.");
  out.Sample("cohort_agent_streams", {}, static_cast<double>(agent_streams));
  for (const auto& [name, help, value] :
       {std::tuple{"cohort_rpc_connections_refused_total",
                   "RPC connections closed by the HTTP/2 guard: a client past a bound (header "
                   "block, open streams, resets, control frames), kept out after one, or past a "
                   "connection cap with none idle to make room.",
                   refusals.rpc_connections_refused},
        std::tuple{"cohort_rpc_connections_shed_total",
                   "RPC connections (TCP and the local socket) closed at accept for want of a "
                   "file descriptor.",
                   refusals.rpc_connections_shed},
        std::tuple{"cohort_http_connections_refused_total",
                   "HTTP connections closed at once: their address held its bound of "
                   "connections or TLS handshakes.",
                   refusals.http_connections_refused},
        std::tuple{"cohort_http_connections_shed_total",
                   "HTTP connections closed at accept for want of a file descriptor.",
                   refusals.http_connections_shed},
        std::tuple{"cohort_rpc_calls_refused_total",
                   "Calls refused RESOURCE_EXHAUSTED: their user (or anonymous callers "
                   "together) made more calls a second than allowed.",
                   refusals.rpc_calls_refused},
        std::tuple{"cohort_agent_reports_refused_total",
                   "Agent reports dropped: about a job with no rank on the reporting node.",
                   refusals.agent_reports_refused},
        std::tuple{"cohort_state_write_stalls_total",
                   "Commits of the state database refused for want of space (each retried).",
                   refusals.state_write_stalls}}) {
    out.Family(name, MetricType::kCounter, help);
    out.Sample(name, {}, static_cast<double>(value));
  }
  out.Family("cohort_state_writes_refused", MetricType::kGauge,
             "1 while the state database cannot be written (a full disk) and changes are "
             "refused; 0 otherwise.");
  out.Sample("cohort_state_writes_refused", {}, refusals.state_writes_refused ? 1.0 : 0.0);
  return out.Take();
}

}  // namespace cohort::controller
