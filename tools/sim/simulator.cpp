// SPDX-License-Identifier: Apache-2.0
#include "simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <nlohmann/json.hpp>
#include <numeric>
#include <queue>
#include <span>
#include <unordered_map>
#include <utility>

#include "cohort/alloc/reservation_timeline.h"
#include "cohort/engine/engine.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"

namespace cohort::sim {
namespace {

// Virtual time starts here (2023-11-14), not at 0, so that no time the
// engine keeps looks like "unset".
constexpr Millis kEpoch{1'700'000'000'000};
// Bounded slowdown's bound: jobs shorter than this count as this long.
constexpr double kSlowdownBound = 10.0;
// Ticks with nothing running and nothing left to submit after which the
// jobs still pending are given up as unable to start.
constexpr int kIdleTicksBeforeGivingUp = 3;

enum class EventKind : std::uint8_t { kFinish, kSubmit, kTick };

struct Event {
  Millis at{0};
  std::uint64_t seq = 0;
  EventKind kind = EventKind::kTick;
  std::int64_t arg = 0;  ///< job id (kFinish) or trace position (kSubmit)
  int attempt = 0;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

double Seconds(Millis m) { return static_cast<double>(m.count()) / 1000.0; }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank.
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

class Replay {
 public:
  Replay(const config::ClusterConfig& config, const topology::Topology& topology,
         const alloc::NodePool& pool, const std::vector<TraceJob>& trace, const SimOptions& options)
      : topology_(topology),
        pool_(pool),
        trace_(trace),
        options_(options),
        engine_(config, topology, pool) {}

  absl::StatusOr<SimReport> Run();

 private:
  struct Live {
    int attempt = 0;
    std::vector<std::pair<NodeId, bool>> nodes;  ///< node, ranks ended
  };

  void Push(Millis at, EventKind kind, std::int64_t arg, int attempt = 0) {
    events_.push(Event{at, ++seq_, kind, arg, attempt});
  }
  void Submit(std::size_t position, Millis now);
  void Finish(JobId id, int attempt, Millis now);
  void Terminate(JobId id, NodeId node, Millis now);
  void Handle(Effects& effects, Millis now);
  void Observe(JobId id);
  void Launched(const LaunchCommand& launch, Millis now);
  void PrepareOptimum();
  [[nodiscard]] std::pair<int, int> Optimum(int nodes) const;
  void CountSplitSegments(const Job& job, JobOutcome& outcome) const;
  [[nodiscard]] int SplitSegments(std::span<const NodeId> nodes, int segment) const;

  const topology::Topology& topology_;
  const alloc::NodePool& pool_;
  const std::vector<TraceJob>& trace_;
  const SimOptions& options_;
  Engine engine_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  std::uint64_t seq_ = 0;
  std::vector<std::size_t> order_;  ///< trace indices by submit time
  std::vector<JobOutcome> outcomes_;
  std::vector<std::uint32_t> uid_of_;  ///< by trace index: users numbered from 1000
  std::unordered_map<JobId, std::size_t> index_of_;
  std::unordered_map<JobId, Live> live_;
  std::size_t submitted_ = 0;
  std::size_t open_ = 0;  ///< submitted, not finished
  std::size_t passes_ = 0;
  std::vector<int> leaf_sizes_;                   ///< descending
  std::vector<std::pair<int, int>> level_sizes_;  ///< (nodes, level) of every switch
};

std::pair<int, int> Replay::Optimum(int nodes) const {
  int leaves = 0;
  int sum = 0;
  for (const int size : leaf_sizes_) {
    if (sum >= nodes) break;
    sum += size;
    ++leaves;
  }
  int level = topology_.MaxLevel();
  for (const auto& [size, switch_level] : level_sizes_) {
    if (size >= nodes) level = std::min(level, switch_level);
  }
  return {std::max(leaves, 1), level};
}

int Replay::SplitSegments(std::span<const NodeId> nodes, int segment) const {
  int split = 0;
  for (std::size_t first = 0; first + static_cast<std::size_t>(segment) <= nodes.size();
       first += static_cast<std::size_t>(segment)) {
    const topology::GroupId group = topology_.GroupOf(nodes[first]);
    for (int i = 1; i < segment; ++i) {
      if (topology_.GroupOf(nodes[first + static_cast<std::size_t>(i)]) != group) {
        ++split;
        break;
      }
    }
  }
  return split;
}

// The placement's split segments, and first fit's on the same free nodes:
// the first nodes of the node table (Slurm's order without a topology
// plugin) that could each take one node of the gang.
void Replay::CountSplitSegments(const Job& job, JobOutcome& outcome) const {
  const int segment = outcome.segment;
  std::vector<NodeId> placed;
  for (const alloc::NodeGrant& g : job.run.placement.grants) placed.push_back(g.node);
  outcome.split_segments = SplitSegments(placed, segment);
  const alloc::NodePool& pool = engine_.Pool();
  std::vector<NodeId> first_fit;
  for (NodeId n = 0; n < pool.NodeCount() && std::cmp_less(first_fit.size(), placed.size()); ++n) {
    if (pool.Condition(n) != alloc::NodeCondition::kUp) continue;
    if (job.gang.partition && pool.GetPartition(*job.gang.partition).contains[n] == 0) continue;
    alloc::NodeFree free = pool.Free(n);
    for (const alloc::NodeGrant& g : job.run.placement.grants) {
      if (g.node != n) continue;
      free.cpus += g.cpus;
      free.memory_mb += g.memory_mb;
      free.gpus |= g.gpus;
    }
    if (MayFitOneNode(job.gang, pool.Capacity(n), free)) first_fit.push_back(n);
  }
  if (first_fit.size() == placed.size()) {
    outcome.first_fit_split_segments = SplitSegments(first_fit, segment);
  }
}

void Replay::PrepareOptimum() {
  for (const topology::Switch& s : topology_.Switches()) {
    if (s.level == 0) leaf_sizes_.push_back(s.node_count);
    level_sizes_.emplace_back(s.node_count, s.level);
  }
  std::sort(leaf_sizes_.rbegin(), leaf_sizes_.rend());
}

void Replay::Submit(std::size_t position, Millis now) {
  const std::size_t index = order_[position];
  ++submitted_;
  JobOutcome& outcome = outcomes_[index];
  Effects effects;
  absl::StatusOr<JobId> id =
      engine_.Submit(ToRequest(trace_[index], uid_of_[index], index), now, effects);
  if (!id.ok()) {
    outcome.reason = std::string(id.status().message());
    return;
  }
  outcome.id = *id;
  index_of_.emplace(*id, index);
  ++open_;
  Handle(effects, now);
}

void Replay::Launched(const LaunchCommand& launch, Millis now) {
  const Job* job = engine_.FindJob(launch.job);
  if (job == nullptr) return;
  Live& live = live_[launch.job];
  if (live.attempt != job->run.attempt) live = Live{job->run.attempt, {}};
  live.nodes.emplace_back(launch.node, false);
  if (live.nodes.size() != 1) return;
  const auto index = index_of_.find(launch.job);
  if (index == index_of_.end()) return;
  const std::chrono::seconds runtime = trace_[index->second].runtime;
  if (job->time_limit == kUnlimited || runtime < job->time_limit) {
    Push(now + std::chrono::duration_cast<Millis>(runtime), EventKind::kFinish, launch.job,
         job->run.attempt);
  }
}

void Replay::Finish(JobId id, int attempt, Millis now) {
  const Job* job = engine_.FindJob(id);
  const auto it = live_.find(id);
  if (job == nullptr || job->run.attempt != attempt || job->state != JobState::kRunning ||
      it == live_.end()) {
    return;
  }
  const int tasks = std::max(job->gang.tasks_per_node, 1);
  std::vector<NodeId> nodes;
  for (auto& [node, ended] : it->second.nodes) {
    if (ended) continue;
    ended = true;
    nodes.push_back(node);
  }
  Effects effects;
  for (const NodeId node : nodes) {
    for (int rank = 0; rank < tasks; ++rank) engine_.RankExited(id, node, 0, 0, now, effects);
  }
  for (const NodeId node : nodes) engine_.JobReleased(id, node, now, effects);
  Handle(effects, now);
}

void Replay::Terminate(JobId id, NodeId node, Millis now) {
  // As a fake-exec agent: the ranks end by SIGTERM at once, then the node
  // is released; a node with nothing running answers released.
  Effects effects;
  bool running = false;
  if (const auto it = live_.find(id); it != live_.end()) {
    for (auto& [n, ended] : it->second.nodes) {
      if (n == node && !ended) {
        ended = true;
        running = true;
      }
    }
  }
  if (running) {
    const Job* job = engine_.FindJob(id);
    const int tasks = job == nullptr ? 1 : std::max(job->gang.tasks_per_node, 1);
    for (int rank = 0; rank < tasks; ++rank) engine_.RankExited(id, node, 0, SIGTERM, now, effects);
  }
  engine_.JobReleased(id, node, now, effects);
  Handle(effects, now);
}

void Replay::Handle(Effects& effects, Millis now) {
  Effects taken = std::exchange(effects, {});
  for (const JobId id : taken.changed_jobs) Observe(id);
  for (const Command& command : taken.commands) {
    if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
      Launched(*launch, now);
    } else if (const auto* terminate = std::get_if<TerminateCommand>(&command)) {
      Terminate(terminate->job, terminate->node, now);
    }
    // SignalCommand: fake ranks handle warnings (they checkpoint) and live on.
  }
}

void Replay::Observe(JobId id) {
  const auto index = index_of_.find(id);
  const Job* job = engine_.FindJob(id);
  if (index == index_of_.end() || job == nullptr) return;
  JobOutcome& outcome = outcomes_[index->second];
  outcome.state = job->state;
  outcome.attempts = job->run.attempt;
  if (job->state == JobState::kRunning && outcome.start.count() < 0) {
    outcome.start = std::chrono::duration_cast<std::chrono::seconds>(job->run.start_time - kEpoch);
    outcome.leaves = static_cast<int>(job->run.placement.leaves.size());
    outcome.level = job->run.placement.level;
    if (outcome.segment > 0) CountSplitSegments(*job, outcome);
  }
  if (IsFinished(job->state) && outcome.end.count() < 0) {
    outcome.end = std::chrono::duration_cast<std::chrono::seconds>(job->run.end_time - kEpoch);
    outcome.reason = job->reason;
    --open_;
    live_.erase(id);
  }
}

absl::StatusOr<SimReport> Replay::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  PrepareOptimum();
  outcomes_.resize(trace_.size());
  order_.resize(trace_.size());
  uid_of_.resize(trace_.size());
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return trace_[a].submit_time < trace_[b].submit_time;
  });
  std::map<std::string, std::uint32_t> uids;
  for (std::size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& job = trace_[i];
    JobOutcome& outcome = outcomes_[i];
    outcome.trace_index = i;
    outcome.submit = job.submit_time;
    outcome.nodes = job.nodes;
    outcome.gpus = job.nodes * job.gpus_per_node;
    std::tie(outcome.optimal_leaves, outcome.optimal_level) = Optimum(job.nodes);
    outcome.segment = job.segment;
    uid_of_[i] =
        uids.try_emplace(job.user, 1000 + static_cast<std::uint32_t>(uids.size())).first->second;
  }

  Effects effects;
  for (NodeId node = 0; node < topology_.NodeCount(); ++node) {
    const alloc::NodeCapacity& capacity = pool_.Capacity(node);
    NodeReport report;
    report.cpus = capacity.cpus;
    report.memory_mb = capacity.memory_mb;
    report.gpus = capacity.gpus;
    report.gpu_groups = capacity.gpu_groups;
    if (absl::Status registered = engine_.NodeRegistered(node, report, kEpoch, effects);
        !registered.ok()) {
      return absl::InternalError(fmt::format("node {} could not register: {}",
                                             topology_.NodeName(node), registered.message()));
    }
  }
  Handle(effects, kEpoch);
  for (std::size_t position = 0; position < order_.size(); ++position) {
    Push(kEpoch + std::chrono::duration_cast<Millis>(trace_[order_[position]].submit_time),
         EventKind::kSubmit, static_cast<std::int64_t>(position));
  }
  const Millis tick =
      std::chrono::duration_cast<Millis>(std::max(options_.tick, std::chrono::seconds(1)));
  Push(kEpoch + tick, EventKind::kTick, 0);

  SimReport report;
  int idle_ticks = 0;
  while (!events_.empty()) {
    const Millis now = events_.top().at;
    if (options_.horizon.count() > 0 &&
        now - kEpoch > std::chrono::duration_cast<Millis>(options_.horizon)) {
      break;
    }
    while (!events_.empty() && events_.top().at == now) {
      const Event event = events_.top();
      events_.pop();
      switch (event.kind) {
        case EventKind::kSubmit:
          Submit(static_cast<std::size_t>(event.arg), now);
          break;
        case EventKind::kFinish:
          Finish(event.arg, event.attempt, now);
          break;
        case EventKind::kTick: {
          for (NodeId node = 0; node < topology_.NodeCount(); ++node)
            engine_.NodeHeartbeat(node, now);
          Effects ticked;
          engine_.Tick(now, ticked);
          Handle(ticked, now);
          const bool more = submitted_ < order_.size() || open_ > 0;
          idle_ticks =
              submitted_ == order_.size() && live_.empty() && open_ > 0 ? idle_ticks + 1 : 0;
          if (more && idle_ticks < kIdleTicksBeforeGivingUp) Push(now + tick, EventKind::kTick, 0);
          break;
        }
      }
    }
    if (engine_.ScheduleNeeded()) {
      Effects scheduled;
      engine_.Schedule(now, scheduled);
      ++passes_;
      Handle(scheduled, now);
    }
    if (options_.check_invariants) {
      ++report.invariant_checks;
      if (absl::Status ok = engine_.CheckInvariants(); !ok.ok()) {
        return absl::InternalError(
            fmt::format("at t={} s: {}", Seconds(now - kEpoch), ok.message()));
      }
    }
    if (submitted_ == order_.size() && open_ == 0) break;
  }

  // Figures.
  report.nodes = topology_.NodeCount();
  for (NodeId node = 0; node < topology_.NodeCount(); ++node)
    report.gpus += pool_.Capacity(node).gpus;
  report.jobs = trace_.size();
  std::vector<double> waits;
  double slowdown_sum = 0;
  std::size_t slowdown_count = 0;
  double first_submit = -1;
  double last_end = 0;
  std::size_t optimal = 0;
  std::size_t segments_whole = 0;
  std::size_t first_fit_whole = 0;
  double leaves_sum = 0;
  double levels_sum = 0;
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    JobOutcome& o = outcomes_[i];
    if (!trace_[i].qos.empty()) ++report.qos[trace_[i].qos];
    if (o.id == 0) {
      ++report.refused;
      continue;
    }
    const double submit = static_cast<double>(o.submit.count());
    if (first_submit < 0 || submit < first_submit) first_submit = submit;
    if (o.end.count() < 0) {
      ++report.unfinished;
      continue;
    }
    ++report.finished;
    ++report.states[std::string(JobStateName(o.state))];
    last_end = std::max(last_end, static_cast<double>(o.end.count()));
    if (o.attempts > 1) {
      ++report.preempted_jobs;
      report.requeues += static_cast<std::size_t>(o.attempts - 1);
    }
    if (o.start.count() < 0) continue;
    if (o.split_segments >= 0) {
      ++report.segment_jobs;
      if (o.split_segments == 0) ++segments_whole;
      if (o.first_fit_split_segments >= 0) {
        ++report.first_fit_compared;
        if (o.first_fit_split_segments == 0) ++first_fit_whole;
      }
    }
    const double wait = static_cast<double>((o.start - o.submit).count());
    const double run = static_cast<double>((o.end - o.start).count());
    waits.push_back(wait);
    slowdown_sum += std::max(1.0, (wait + run) / std::max(run, kSlowdownBound));
    ++slowdown_count;
    const double units = report.gpus > 0 ? o.gpus : o.nodes;
    report.gpu_hours_used += units * run / 3600.0;
    if (o.nodes > 1) {
      ++report.multi_node_jobs;
      leaves_sum += o.leaves;
      levels_sum += o.level;
      report.leaves_max = std::max(report.leaves_max, o.leaves);
      ++report.leaves_histogram[o.leaves];
      ++report.level_histogram[o.level];
      if (o.leaves <= o.optimal_leaves) ++optimal;
    }
  }
  if (first_submit >= 0 && last_end > first_submit) {
    report.makespan_hours = (last_end - first_submit) / 3600.0;
    report.gpu_hours_available =
        report.makespan_hours * (report.gpus > 0 ? report.gpus : report.nodes);
    report.utilisation = report.gpu_hours_used / report.gpu_hours_available;
  }
  if (!waits.empty()) {
    report.wait_p50_s = Percentile(waits, 0.50);
    report.wait_p90_s = Percentile(waits, 0.90);
    report.wait_p99_s = Percentile(waits, 0.99);
    report.wait_mean_s =
        std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
  }
  if (slowdown_count > 0)
    report.bounded_slowdown_mean = slowdown_sum / static_cast<double>(slowdown_count);
  if (report.multi_node_jobs > 0) {
    const auto n = static_cast<double>(report.multi_node_jobs);
    report.leaves_mean = leaves_sum / n;
    report.levels_mean = levels_sum / n;
    report.optimal_share = static_cast<double>(optimal) / n;
  }
  if (report.segment_jobs > 0) {
    report.segment_whole_share =
        static_cast<double>(segments_whole) / static_cast<double>(report.segment_jobs);
  }
  if (report.first_fit_compared > 0) {
    report.first_fit_whole_share =
        static_cast<double>(first_fit_whole) / static_cast<double>(report.first_fit_compared);
  }
  report.scheduling_passes = passes_;
  report.outcomes = std::move(outcomes_);
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return report;
}

std::string Count(std::size_t n) {
  const std::string digits = fmt::format("{}", n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Duration(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

}  // namespace

JobRequest ToRequest(const TraceJob& job, std::uint32_t uid, std::size_t index) {
  JobRequest request;
  request.name = fmt::format("trace{}", index);
  request.partition = job.partition;
  request.account = job.account;
  request.user_name = job.user;
  request.uid = uid;
  request.nodes = job.nodes;
  request.tasks_per_node = 1;
  request.gpus_per_node = job.gpus_per_node;
  request.time_limit = job.time_limit;
  request.qos = job.qos;
  request.segment = job.segment;
  return request;
}

absl::StatusOr<SimReport> Simulate(const config::ClusterConfig& config,
                                   const topology::Topology& topology, const alloc::NodePool& pool,
                                   const std::vector<TraceJob>& trace, const SimOptions& options) {
  Replay replay(config, topology, pool, trace, options);
  return replay.Run();
}

std::string FormatReport(const SimReport& r) {
  std::string out;
  out += fmt::format("cluster              {} nodes, {} GPUs\n",
                     Count(static_cast<std::size_t>(r.nodes)),
                     Count(static_cast<std::size_t>(r.gpus)));
  out += fmt::format("jobs                 {} ({} finished, {} refused at submit, {} unfinished)\n",
                     Count(r.jobs), Count(r.finished), Count(r.refused), Count(r.unfinished));
  std::string states;
  for (const auto& [state, n] : r.states)
    states += fmt::format("{}{} {}", states.empty() ? "" : ", ", state, Count(n));
  out += fmt::format("final states         {}\n", states.empty() ? "-" : states);
  out += fmt::format("makespan             {:.1f} h (first submission to last end)\n",
                     r.makespan_hours);
  out += fmt::format("utilisation          {:.3f} ({:.0f} of {:.0f} {}-hours)\n", r.utilisation,
                     r.gpu_hours_used, r.gpu_hours_available, r.gpus > 0 ? "GPU" : "node");
  out +=
      fmt::format("wait                 p50 {}, p90 {}, p99 {}, mean {}\n", Duration(r.wait_p50_s),
                  Duration(r.wait_p90_s), Duration(r.wait_p99_s), Duration(r.wait_mean_s));
  out += fmt::format("bounded slowdown     {:.2f} mean (bound {:.0f} s)\n", r.bounded_slowdown_mean,
                     kSlowdownBound);
  out += fmt::format("preemptions          {} jobs requeued, {} requeues\n",
                     Count(r.preempted_jobs), Count(r.requeues));
  out += fmt::format(
      "multi-node jobs      {}: leaves mean {:.2f}, max {}; levels mean {:.2f}; at the "
      "optimum {:.1f} %\n",
      Count(r.multi_node_jobs), r.leaves_mean, r.leaves_max, r.levels_mean,
      100.0 * r.optimal_share);
  std::string leaves;
  for (const auto& [k, n] : r.leaves_histogram) leaves += fmt::format("  {}:{}", k, Count(n));
  out += fmt::format("  by leaves spanned {}\n", leaves.empty() ? " -" : leaves);
  std::string levels;
  for (const auto& [k, n] : r.level_histogram) levels += fmt::format("  {}:{}", k, Count(n));
  out += fmt::format("  by switch level   {}\n", levels.empty() ? " -" : levels);
  if (r.segment_jobs > 0) {
    out += fmt::format(
        "segment jobs         {}: no segment split across blocks {:.1f} %; first fit on the same "
        "free nodes {:.1f} % (of {})\n",
        Count(r.segment_jobs), 100.0 * r.segment_whole_share, 100.0 * r.first_fit_whole_share,
        Count(r.first_fit_compared));
  }
  if (!r.qos.empty()) {
    std::string qos;
    for (const auto& [name, n] : r.qos)
      qos += fmt::format("{}{} {}", qos.empty() ? "" : ", ", name, Count(n));
    out += fmt::format("qos                  {}\n", qos);
  }
  out += fmt::format("scheduling passes    {}\n", Count(r.scheduling_passes));
  if (r.invariant_checks > 0)
    out += fmt::format("invariant checks     {} (all held)\n", Count(r.invariant_checks));
  out += fmt::format("wall time            {:.2f} s\n", r.wall_seconds);
  return out;
}

std::string ReportJson(const SimReport& r, bool with_jobs) {
  nlohmann::json j;
  j["nodes"] = r.nodes;
  j["gpus"] = r.gpus;
  j["jobs"] = r.jobs;
  j["finished"] = r.finished;
  j["refused"] = r.refused;
  j["unfinished"] = r.unfinished;
  j["states"] = r.states;
  j["qos"] = r.qos;
  j["qos_applied"] = true;
  j["makespan_hours"] = r.makespan_hours;
  j["gpu_hours_used"] = r.gpu_hours_used;
  j["gpu_hours_available"] = r.gpu_hours_available;
  j["utilisation"] = r.utilisation;
  j["wait_s"] = {
      {"p50", r.wait_p50_s}, {"p90", r.wait_p90_s}, {"p99", r.wait_p99_s}, {"mean", r.wait_mean_s}};
  j["bounded_slowdown_mean"] = r.bounded_slowdown_mean;
  j["bounded_slowdown_bound_s"] = kSlowdownBound;
  j["preempted_jobs"] = r.preempted_jobs;
  j["requeues"] = r.requeues;
  nlohmann::json placement;
  placement["multi_node_jobs"] = r.multi_node_jobs;
  placement["leaves_mean"] = r.leaves_mean;
  placement["leaves_max"] = r.leaves_max;
  placement["levels_mean"] = r.levels_mean;
  placement["optimal_share"] = r.optimal_share;
  placement["segment_jobs"] = r.segment_jobs;
  placement["segment_whole_share"] = r.segment_whole_share;
  placement["first_fit_compared"] = r.first_fit_compared;
  placement["first_fit_whole_share"] = r.first_fit_whole_share;
  nlohmann::json leaves = nlohmann::json::object();
  for (const auto& [k, n] : r.leaves_histogram) leaves[std::to_string(k)] = n;
  nlohmann::json levels = nlohmann::json::object();
  for (const auto& [k, n] : r.level_histogram) levels[std::to_string(k)] = n;
  placement["by_leaves"] = leaves;
  placement["by_level"] = levels;
  j["placement"] = placement;
  j["scheduling_passes"] = r.scheduling_passes;
  j["invariant_checks"] = r.invariant_checks;
  j["wall_seconds"] = r.wall_seconds;
  if (with_jobs) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const JobOutcome& o : r.outcomes) {
      jobs.push_back({{"index", o.trace_index},
                      {"id", o.id},
                      {"state", std::string(JobStateName(o.state))},
                      {"reason", o.reason},
                      {"submit", o.submit.count()},
                      {"start", o.start.count()},
                      {"end", o.end.count()},
                      {"nodes", o.nodes},
                      {"attempts", o.attempts},
                      {"leaves", o.leaves},
                      {"level", o.level},
                      {"optimal_leaves", o.optimal_leaves},
                      {"optimal_level", o.optimal_level},
                      {"segment", o.segment},
                      {"split_segments", o.split_segments},
                      {"first_fit_split_segments", o.first_fit_split_segments}});
    }
    j["jobs_detail"] = jobs;
  }
  return j.dump(2) + "\n";
}

}  // namespace cohort::sim
