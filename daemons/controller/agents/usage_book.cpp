// SPDX-License-Identifier: Apache-2.0
#include "usage_book.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace cohort::controller {
namespace {

using topology::NodeId;

// Past a petabyte, or a century of CPU time, a figure is no sample.
constexpr std::int64_t kMostKb = std::int64_t{1} << 40;
constexpr std::int64_t kMostCpuMs = std::int64_t{1} << 52;

}  // namespace

absl::Status CheckUsageReport(const v1::UsageReport& report) {
  const auto refuse = [](std::string what) {
    return absl::InvalidArgumentError(fmt::format("usage report: {}", what));
  };
  if (report.launches_size() > kMostReportLaunches) {
    return refuse(
        fmt::format("{} launches, more than {}", report.launches_size(), kMostReportLaunches));
  }
  if (report.gpus_size() > kMostReportGpus) {
    return refuse(fmt::format("{} GPUs, more than {}", report.gpus_size(), kMostReportGpus));
  }
  for (const v1::GpuSample& gpu : report.gpus()) {
    if (gpu.index() < 0 || gpu.index() >= kMostReportGpus || gpu.util_pct() < 0 ||
        gpu.util_pct() > 100 || gpu.mem_used_mb() < 0 || gpu.mem_used_mb() > kMostKb) {
      return refuse(fmt::format("GPU {}: utilization {}% and {} MB in use are no sample",
                                gpu.index(), gpu.util_pct(), gpu.mem_used_mb()));
    }
  }
  for (const v1::LaunchUsage& launch : report.launches()) {
    if (launch.tasks_size() > kMostLaunchTasks) {
      return refuse(fmt::format("job {}: {} tasks, more than {}", launch.job_id(),
                                launch.tasks_size(), kMostLaunchTasks));
    }
    for (const v1::TaskSample& task : launch.tasks()) {
      if (task.rank() < 0 || task.cpu_ms() < 0 || task.cpu_ms() > kMostCpuMs || task.rss_kb() < 0 ||
          task.rss_kb() > kMostKb || task.max_rss_kb() < 0 || task.max_rss_kb() > kMostKb) {
        return refuse(fmt::format("job {} rank {}: {} ms of CPU and {} kB resident are no sample",
                                  launch.job_id(), task.rank(), task.cpu_ms(), task.rss_kb()));
      }
    }
  }
  return absl::OkStatus();
}

void UsageBook::Record(NodeId node, const std::string& node_name, Millis at,
                       const std::vector<Accepted>& launches, const v1::UsageReport& report) {
  std::vector<std::pair<JobId, int>>& listed = listed_[node];
  std::vector<JobId> touched;
  for (const auto& [job, step] : listed) touched.push_back(job);
  Unlist(node, listed);
  NodeGpus& gpus = gpus_[node];
  gpus.util.assign(kMostReportGpus, -1);
  gpus.mem_mb.assign(kMostReportGpus, 0);
  for (const v1::GpuSample& gpu : report.gpus()) {
    gpus.util[static_cast<std::size_t>(gpu.index())] = gpu.util_pct();
    gpus.mem_mb[static_cast<std::size_t>(gpu.index())] = gpu.mem_used_mb();
  }
  for (const Accepted& accepted : launches) {
    const v1::LaunchUsage& launch = *accepted.launch;
    const int step = launch.has_step() ? launch.step() : kOwnLaunch;
    NodeSample& sample = jobs_[launch.job_id()].launches[step][node];
    sample.node = node_name;
    sample.at = at;
    sample.gpus = launch.gpus();
    sample.tasks.assign(launch.tasks().begin(), launch.tasks().end());
    listed.emplace_back(launch.job_id(), step);
    touched.push_back(launch.job_id());
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const JobId job : touched) {
    const auto it = jobs_.find(job);
    if (it == jobs_.end()) continue;
    if (it->second.launches.empty()) {
      jobs_.erase(it);
      continue;
    }
    MarkIdle(it->second, at);
  }
}

void UsageBook::Forget(JobId job) { jobs_.erase(job); }

void UsageBook::ForgetNode(NodeId node) {
  const auto it = listed_.find(node);
  if (it == listed_.end()) return;
  std::vector<std::pair<JobId, int>> listed = std::move(it->second);
  listed_.erase(it);
  std::vector<JobId> jobs;
  for (const auto& [job, step] : listed) jobs.push_back(job);
  Unlist(node, listed);
  for (const JobId job : jobs) {
    const auto found = jobs_.find(job);
    if (found != jobs_.end() && found->second.launches.empty()) jobs_.erase(found);
  }
  gpus_.erase(node);
}

void UsageBook::Unlist(NodeId node, std::vector<std::pair<JobId, int>>& listed) {
  // A job left without launches keeps its entry (and its idle mark) for
  // the caller to decide on.
  for (const auto& [job, step] : listed) {
    const auto it = jobs_.find(job);
    if (it == jobs_.end()) continue;
    const auto launch = it->second.launches.find(step);
    if (launch == it->second.launches.end()) continue;
    launch->second.erase(node);
    if (launch->second.empty()) it->second.launches.erase(launch);
  }
  listed.clear();
}

void UsageBook::Sum(const std::map<NodeId, NodeSample>& nodes, v1::LiveUsage& out) const {
  int measured = 0;
  std::int64_t util_sum = 0;
  for (const auto& [node, sample] : nodes) {
    if (out.sampled_ms() == 0 || sample.at.count() < out.sampled_ms()) {
      out.set_sampled_ms(sample.at.count());
    }
    out.set_tasks(out.tasks() + static_cast<int>(sample.tasks.size()));
    for (const v1::TaskSample& task : sample.tasks) {
      out.set_cpu_ms(std::min(out.cpu_ms() + task.cpu_ms(), kMostCpuMs));
      out.set_rss_kb(out.rss_kb() + task.rss_kb());
      if (out.max_cpu_node().empty() || task.cpu_ms() > out.max_cpu_ms()) {
        out.set_max_cpu_ms(task.cpu_ms());
        out.set_max_cpu_node(sample.node);
        out.set_max_cpu_task(task.rank());
      }
      const std::int64_t peak = std::max(task.max_rss_kb(), task.rss_kb());
      if (out.max_rss_node().empty() || peak > out.max_rss_kb()) {
        out.set_max_rss_kb(peak);
        out.set_max_rss_node(sample.node);
        out.set_max_rss_task(task.rank());
      }
    }
    out.set_gpus(out.gpus() + std::popcount(sample.gpus));
    const auto gpus = gpus_.find(node);
    for (int index = 0; index < kMostReportGpus && gpus != gpus_.end(); ++index) {
      const auto i = static_cast<std::size_t>(index);
      if (((sample.gpus >> index) & 1U) == 0 || gpus->second.util[i] < 0) continue;
      ++measured;
      util_sum += gpus->second.util[i];
      out.set_gpu_util_max_pct(std::max(out.gpu_util_max_pct(), gpus->second.util[i]));
      out.set_gpu_mem_mb(out.gpu_mem_mb() + gpus->second.mem_mb[i]);
      out.set_gpu_mem_max_mb(std::max(out.gpu_mem_max_mb(), gpus->second.mem_mb[i]));
    }
  }
  out.set_nodes(static_cast<int>(nodes.size()));
  if (measured > 0) {
    out.set_gpu_measured(true);
    out.set_gpu_util_pct(static_cast<int>(util_sum / measured));
  }
}

void UsageBook::MarkIdle(JobSamples& job, Millis at) const {
  // The job's GPUs, once per node however many of its launches hold them.
  std::map<NodeId, NodeSample> nodes;
  for (const auto& [step, launch] : job.launches) {
    for (const auto& [node, sample] : launch) nodes[node].gpus |= sample.gpus;
  }
  v1::LiveUsage whole;
  Sum(nodes, whole);
  const bool idle = whole.gpu_measured() && whole.gpu_util_max_pct() < kIdleGpuPercent;
  if (!idle) {
    job.gpu_idle_since = Millis{0};
  } else if (job.gpu_idle_since == Millis{0}) {
    job.gpu_idle_since = at;
  }
}

std::vector<v1::LiveUsage> UsageBook::Launches(JobId job, const std::string& own_name) const {
  std::vector<v1::LiveUsage> out;
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [step, nodes] : it->second.launches) {
    v1::LiveUsage& usage = out.emplace_back();
    usage.set_step(step == kOwnLaunch ? own_name : std::to_string(step));
    Sum(nodes, usage);
  }
  return out;
}

std::optional<v1::LiveUsage> UsageBook::Whole(JobId job) const {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  // Tasks, CPU and memory are every launch's; a node's GPUs count once.
  std::map<NodeId, NodeSample> nodes;
  for (const auto& [step, launch] : it->second.launches) {
    for (const auto& [node, sample] : launch) {
      NodeSample& into = nodes[node];
      into.node = sample.node;
      into.at = into.at == Millis{0} ? sample.at : std::min(into.at, sample.at);
      into.gpus |= sample.gpus;
      into.tasks.insert(into.tasks.end(), sample.tasks.begin(), sample.tasks.end());
    }
  }
  v1::LiveUsage out;
  Sum(nodes, out);
  out.set_gpu_idle_since_ms(it->second.gpu_idle_since.count());
  return out;
}

std::vector<JobId> UsageBook::Jobs() const {
  std::vector<JobId> out;
  out.reserve(jobs_.size());
  for (const auto& [job, samples] : jobs_) out.push_back(job);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace cohort::controller
