// SPDX-License-Identifier: Apache-2.0
#include "format/job_format.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/engine/job.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"

namespace cohort::cli {
namespace {

struct StateName {
  v1::JobState state;
  std::string_view name;
  std::string_view code;
};
constexpr std::array<StateName, 8> kJobStates = {{
    {v1::JOB_PENDING, "PENDING", "PD"},
    {v1::JOB_RUNNING, "RUNNING", "R"},
    {v1::JOB_COMPLETING, "COMPLETING", "CG"},
    {v1::JOB_COMPLETED, "COMPLETED", "CD"},
    {v1::JOB_FAILED, "FAILED", "F"},
    {v1::JOB_CANCELLED, "CANCELLED", "CA"},
    {v1::JOB_TIMEOUT, "TIMEOUT", "TO"},
    {v1::JOB_NODE_FAIL, "NODE_FAIL", "NF"},
}};

nlohmann::ordered_json NullIfZero(std::int64_t value) {
  return value == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(value);
}

template <typename Repeated>
nlohmann::ordered_json Array(const Repeated& items) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& item : items) out.push_back(item);
  return out;
}

}  // namespace

std::vector<std::string_view> CommaList(std::string_view text) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t stop = std::min(text.find(',', start), text.size());
    if (stop > start) items.push_back(text.substr(start, stop - start));
    start = stop + 1;
  }
  return items;
}

std::vector<std::string> CommaStrings(std::string_view text) {
  const std::vector<std::string_view> items = CommaList(text);
  return {items.begin(), items.end()};
}

std::string_view JobStateName(v1::JobState state) {
  for (const StateName& s : kJobStates) {
    if (s.state == state) return s.name;
  }
  return "UNKNOWN";
}

std::string_view JobStateCode(v1::JobState state) {
  for (const StateName& s : kJobStates) {
    if (s.state == state) return s.code;
  }
  return "?";
}

std::optional<v1::JobState> ParseJobState(std::string_view text) {
  for (const StateName& s : kJobStates) {
    if (EqualsIgnoreCase(text, s.name) || EqualsIgnoreCase(text, s.code)) return s.state;
  }
  if (EqualsIgnoreCase(text, "CANCELED")) return v1::JOB_CANCELLED;
  return std::nullopt;
}

bool IsFinished(v1::JobState state) {
  return state == v1::JOB_COMPLETED || state == v1::JOB_FAILED || state == v1::JOB_CANCELLED ||
         state == v1::JOB_TIMEOUT || state == v1::JOB_NODE_FAIL;
}

std::string_view NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_IDLE:
      return "IDLE";
    case v1::NODE_MIXED:
      return "MIXED";
    case v1::NODE_ALLOCATED:
      return "ALLOCATED";
    case v1::NODE_DRAINING:
      return "DRAINING";
    case v1::NODE_DRAINED:
      return "DRAINED";
    case v1::NODE_DOWN:
      return "DOWN";
    default:
      return "UNKNOWN";
  }
}

std::string_view JobStateName(const v1::Job& job) {
  return job.stopped() ? std::string_view("STOPPED") : JobStateName(job.state());
}

std::string_view JobStateCode(const v1::Job& job) {
  return job.stopped() ? std::string_view("ST") : JobStateCode(job.state());
}

std::string NodeStateLower(v1::NodeState state) {
  std::string name(NodeStateName(state));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string NodeStateText(const v1::Node& node) {
  return NodeStateLower(node.state()) + (node.not_responding() ? "*" : "");
}

std::string NodeReason(const v1::Node& node, std::int64_t now_ms) {
  if (!node.reason().empty() || !node.not_responding() || node.last_heard_ms() <= 0) {
    return node.reason();
  }
  return fmt::format("not responding for {} s",
                     std::max<std::int64_t>(now_ms - node.last_heard_ms(), 0) / 1000);
}

std::string ReasonSetter(const v1::Node& node) {
  return node.reason_user().empty() ? std::string(kControllerSetter) : node.reason_user();
}

std::string ReasonStamp(const v1::Node& node) {
  if (node.reason().empty() || node.reason_time_ms() <= 0) return "";
  return fmt::format(" [{}@{}]", ReasonSetter(node), FormatTimestamp(node.reason_time_ms()));
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatElapsed(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const std::int64_t days = seconds / 86400;
  const std::int64_t hours = seconds / 3600 % 24;
  const std::int64_t minutes = seconds / 60 % 60;
  const std::int64_t secs = seconds % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, hours, minutes, secs);
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, secs);
  return fmt::format("{}:{:02}", minutes, secs);
}

std::string FormatLimit(std::int64_t seconds) {
  if (seconds <= 0 || seconds >= kUnlimited.count()) return "UNLIMITED";
  return FormatSlurmTime(std::chrono::seconds(seconds));
}

std::string FormatSlurmLimit(std::int64_t seconds) {
  if (seconds <= 0 || seconds >= kUnlimited.count()) return "UNLIMITED";
  return FormatElapsed(seconds);
}

std::string FormatTimestamp(std::int64_t epoch_ms) {
  if (epoch_ms <= 0) return "none";
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm local{};
  if (::localtime_r(&seconds, &local) == nullptr) return std::to_string(epoch_ms);
  char text[32];
  const std::size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &local);
  return std::string(text, n);
}

std::int64_t TimeUsedSeconds(const v1::Job& job, std::int64_t now_ms) {
  if (job.start_time_ms() <= 0) return 0;
  const std::int64_t end = job.end_time_ms() > 0 ? job.end_time_ms() : now_ms;
  return end > job.start_time_ms() ? (end - job.start_time_ms()) / 1000 : 0;
}

std::string JobUser(const v1::Job& job) {
  // The controller names owners (it looks the uid up where accounts live);
  // the command makes no lookup of its own (cmake/StaticClients.cmake).
  if (!job.spec().user_name().empty()) return job.spec().user_name();
  return std::to_string(job.uid());
}

std::string SignalName(int signal) {
  if (signal <= 0) return std::to_string(signal);
  const char* name = ::sigabbrev_np(signal);
  return name == nullptr ? std::to_string(signal) : std::string(name);
}

std::optional<int> SignalNumber(std::string_view text) {
  int n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (!text.empty() && error == std::errc() && end == text.data() + text.size()) {
    return n >= 1 && n < NSIG ? std::optional<int>(n) : std::nullopt;
  }
  std::string_view name = text;
  if (name.size() > 3 && EqualsIgnoreCase(name.substr(0, 3), "SIG")) name.remove_prefix(3);
  for (int s = 1; s < NSIG; ++s) {
    const char* abbreviation = ::sigabbrev_np(s);
    if (abbreviation != nullptr && EqualsIgnoreCase(name, abbreviation)) return s;
  }
  return std::nullopt;
}

std::string FormatWarning(const v1::JobSpec& spec) {
  if (spec.warn_signal() < 0) return "none";
  const int signal = spec.warn_signal() == 0 ? kDefaultWarningSignal : spec.warn_signal();
  const std::int64_t seconds =
      spec.warn_seconds() == 0 ? kDefaultWarningLead.count() : spec.warn_seconds();
  return fmt::format("{}{}@{}", spec.warn_batch_only() ? "B:" : "", SignalName(signal), seconds);
}

std::string FormatExitCode(const v1::Job& job) {
  return fmt::format("{}:{}", job.exit_code(), job.exit_signal());
}

std::string JobDisplayId(const v1::Job& job) {
  if (job.array_job_id() > 0 && job.array_task_id() < 0 && !job.array_pending().empty()) {
    return fmt::format("{}_[{}]", job.array_job_id(), job.array_pending());
  }
  return job.display_id().empty() ? std::to_string(job.id()) : job.display_id();
}

bool DisplayOrder(const v1::Job& a, const v1::Job& b) {
  auto key = [](const v1::Job& job) {
    const std::int64_t group = job.array_job_id() > 0 ? job.array_job_id() : job.id();
    // The array's own record (its tasks not yet started) after its tasks.
    const std::int64_t task = job.array_job_id() > 0 && job.array_task_id() < 0
                                  ? std::numeric_limits<std::int64_t>::max()
                                  : job.array_task_id();
    return std::tuple(group, task, job.id());
  };
  return key(a) < key(b);
}

nlohmann::ordered_json PreemptionToJson(const v1::Preemption& preemption) {
  nlohmann::ordered_json out;
  out["time_ms"] = preemption.time_ms();
  out["by_job"] = preemption.by_job();
  out["by_display_id"] = preemption.by_display_id();
  out["mode"] = preemption.mode();
  out["attempt"] = preemption.attempt();
  out["signal"] = preemption.signal() > 0 ? nlohmann::ordered_json(SignalName(preemption.signal()))
                                          : nlohmann::ordered_json(nullptr);
  out["grace_s"] = preemption.grace_s();
  out["detail"] = preemption.detail();
  return out;
}

void PrintColumns(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c + 1 == row.size() ? row[c] : fmt::format("{:<{}}  ", row[c], widths[c]);
    }
    out << line << '\n';
  }
}

void PrintParsable(const std::vector<std::vector<std::string>>& rows, ParsableEnd end,
                   std::ostream& out) {
  for (const auto& row : rows) {
    std::string line = fmt::format("{}", fmt::join(row, "|"));
    if (end == ParsableEnd::kTrailingBar) line += '|';
    out << line << '\n';
  }
}

nlohmann::ordered_json JobToJson(const v1::Job& job, std::int64_t now_ms) {
  const v1::JobSpec& spec = job.spec();
  nlohmann::ordered_json out;
  out["id"] = job.id();
  out["name"] = spec.name();
  out["user"] = JobUser(job);
  out["uid"] = job.uid();
  out["account"] = spec.account();
  out["partition"] = spec.partition();
  out["state"] = JobStateName(job);
  out["reason"] = job.reason();
  out["reason_detail"] = job.reason_detail();
  out["nodes"] = job.nodes();
  out["node_count"] = spec.nodes();
  out["tasks_per_node"] = spec.tasks_per_node();
  out["cpus_per_task"] = spec.cpus_per_task();
  out["gpus_per_node"] = spec.gpus_per_node();
  out["memory_mb"] = spec.memory_mb();
  out["time_limit_s"] = job.time_limit_s() <= 0 || job.time_limit_s() >= kUnlimited.count()
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json(job.time_limit_s());
  out["time_used_s"] = TimeUsedSeconds(job, now_ms);
  out["submit_time_ms"] = NullIfZero(job.submit_time_ms());
  out["start_time_ms"] = NullIfZero(job.start_time_ms());
  out["end_time_ms"] = NullIfZero(job.end_time_ms());
  out["exit_code"] = job.exit_code();
  out["exit_signal"] = job.exit_signal();
  out["attempt"] = job.attempt();
  out["leaves"] = job.leaves();
  out["queue_position"] = job.state() == v1::JOB_PENDING ? NullIfZero(job.queue_position())
                                                         : nlohmann::ordered_json(nullptr);
  out["argv"] = Array(spec.argv());
  out["batch_script"] = !spec.script().empty();
  out["work_dir"] = spec.work_dir();
  out["submit_dir"] = spec.submit_dir();
  out["output"] = spec.output();
  out["error"] = spec.error();
  out["exclusive"] = spec.exclusive();
  out["exclusive_topo"] = spec.exclusive_topo();
  out["switches"] = spec.switches();
  out["switches_wait_s"] = spec.switches_wait_s();
  out["segment"] =
      spec.segment() > 0 ? nlohmann::ordered_json(spec.segment()) : nlohmann::ordered_json(nullptr);
  out["spread_segments"] = spec.spread_segments();
  out["imex_channels"] = Array(job.imex_channels());
  if (const v1::PlacementReport& p = job.placement(); !p.summary().empty()) {
    nlohmann::ordered_json segments = nlohmann::ordered_json::array();
    for (const v1::PlacedSegment& s : p.segments()) {
      segments.push_back({{"nodes", s.nodes()}, {"group", s.group()}});
    }
    out["placement"] = {{"segments", std::move(segments)}, {"blocks", Array(p.blocks())},
                        {"leaves", Array(p.leaves())},     {"domain", p.domain()},
                        {"worst_hops", p.worst_hops()},    {"rank_order", p.rank_order()},
                        {"summary", p.summary()}};
  } else {
    out["placement"] = nullptr;
  }
  out["requeue"] = spec.requeue();
  out["spares"] = spec.spares();
  out["spare_nodes"] = job.spare_nodes();
  out["restart_policy"] = spec.restart_policy().empty() ? "job" : spec.restart_policy();
  nlohmann::ordered_json repairs = nlohmann::ordered_json::array();
  for (const v1::Repair& r : job.repairs()) {
    repairs.push_back({{"time_ms", r.time_ms()},
                       {"attempt", r.attempt()},
                       {"lost", Array(r.lost())},
                       {"replacement", Array(r.replacement())},
                       {"node_ranks", Array(r.node_ranks())},
                       {"reason", r.reason()},
                       {"restarted", r.restarted()}});
  }
  out["repairs"] = std::move(repairs);
  out["features"] = Array(spec.features());
  out["nodelist"] = spec.nodelist();
  out["exclude"] = spec.exclude();
  const bool warned = spec.warn_signal() >= 0;
  out["warn_signal"] =
      warned ? nlohmann::ordered_json(
                   SignalName(spec.warn_signal() == 0 ? kDefaultWarningSignal : spec.warn_signal()))
             : nlohmann::ordered_json(nullptr);
  out["warn_seconds"] =
      warned ? nlohmann::ordered_json(spec.warn_seconds() == 0 ? kDefaultWarningLead.count()
                                                               : std::int64_t{spec.warn_seconds()})
             : nlohmann::ordered_json(nullptr);
  out["warn_batch_only"] = warned && spec.warn_batch_only();
  out["display_id"] = JobDisplayId(job);
  out["array_job_id"] = NullIfZero(job.array_job_id());
  out["array_task_id"] = job.array_job_id() > 0 && job.array_task_id() >= 0
                             ? nlohmann::ordered_json(job.array_task_id())
                             : nlohmann::ordered_json(nullptr);
  out["array_pending"] = job.array_pending();
  out["array"] = spec.array();
  out["qos"] = job.qos().empty() ? spec.qos() : job.qos();
  out["priority"] = job.priority();
  out["expected_start_ms"] = NullIfZero(job.expected_start_ms());
  out["image_status"] = job.image_status();
  out["held"] = job.held();
  out["dependency"] = job.dependency();
  out["kill_on_invalid_dep"] = spec.kill_on_invalid_dep();
  out["suspended"] = job.suspended();
  out["preempt_deadline_ms"] = NullIfZero(job.preempt_deadline_ms());
  out["preemptions"] = nlohmann::ordered_json::array();
  for (const v1::Preemption& p : job.preemptions())
    out["preemptions"].push_back(PreemptionToJson(p));
  out["steps"] = nlohmann::ordered_json::array();
  for (const v1::JobStep& step : job.steps()) out["steps"].push_back(StepToJson(job, step, now_ms));
  return out;
}

nlohmann::ordered_json NodeToJson(const v1::Node& node) {
  nlohmann::ordered_json out;
  out["name"] = node.name();
  out["state"] = NodeStateName(node.state());
  out["not_responding"] = node.not_responding();
  out["reason"] = NodeReason(node, NowMs());
  // Who gave the reason (null: the controller) and when (null: not known).
  out["reason_user"] = node.reason_user().empty() ? nlohmann::ordered_json()
                                                  : nlohmann::ordered_json(node.reason_user());
  out["reason_time_ms"] = NullIfZero(node.reason_time_ms());
  out["cpus"] = node.cpus();
  out["cpus_allocated"] = node.cpus_allocated();
  out["memory_mb"] = node.memory_mb();
  out["memory_allocated_mb"] = node.memory_allocated_mb();
  out["gpus"] = node.gpus();
  out["gpus_allocated"] = node.gpus_allocated();
  out["features"] = Array(node.features());
  out["partitions"] = Array(node.partitions());
  out["jobs"] = Array(node.jobs());
  out["leaf"] = node.leaf();
  out["block"] = node.block();
  return out;
}

std::string StepDisplayId(const v1::Job& job, const v1::JobStep& step) {
  return fmt::format("{}.{}", JobDisplayId(job), step.name());
}

std::string FormatMaxRss(std::int64_t kb) { return kb > 0 ? fmt::format("{}K", kb) : ""; }

std::string FormatCpuTime(std::int64_t ms) {
  if (ms < 3600 * 1000)
    return fmt::format("{:02}:{:02}.{:03}", ms / 60000, ms / 1000 % 60, ms % 1000);
  return FormatSlurmTime(std::chrono::seconds(ms / 1000));
}

std::string FormatUsageSize(std::int64_t kb) {
  constexpr std::int64_t kKiB = 1024;
  if (kb < kKiB) return fmt::format("{}K", std::max<std::int64_t>(kb, 0));
  if (kb < kKiB * kKiB) return fmt::format("{:.2f}M", static_cast<double>(kb) / kKiB);
  if (kb < kKiB * kKiB * kKiB) {
    return fmt::format("{:.2f}G", static_cast<double>(kb) / (kKiB * kKiB));
  }
  return fmt::format("{:.2f}T", static_cast<double>(kb) / (kKiB * kKiB * kKiB));
}

std::string FormatTresUsage(std::int64_t cpu_ms, std::int64_t rss_kb, std::int64_t gpu_mem_mb,
                            int gpu_util_pct) {
  // Slurm names TRES in their ids' order: cpu, mem, then the GRES.
  std::string tres = fmt::format("cpu={},mem={}", FormatCpuTime(std::max<std::int64_t>(cpu_ms, 0)),
                                 FormatUsageSize(rss_kb));
  if (gpu_util_pct >= 0) {
    tres += fmt::format(",gres/gpumem={},gres/gpuutil={}", FormatUsageSize(gpu_mem_mb * 1024),
                        gpu_util_pct);
  }
  return tres;
}

int HostlistSize(const std::string& hostlist) {
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(hostlist);
  return names.ok() ? static_cast<int>(names->size()) : 0;
}

int StepNodeCount(const v1::JobStep& step) { return HostlistSize(step.nodes()); }

std::int64_t StepElapsedSeconds(const v1::JobStep& step, std::int64_t now_ms) {
  if (step.start_time_ms() <= 0) return 0;
  const std::int64_t end = step.end_time_ms() > 0 ? step.end_time_ms() : now_ms;
  return std::max<std::int64_t>(0, (end - step.start_time_ms()) / 1000);
}

nlohmann::ordered_json StepToJson(const v1::Job& job, const v1::JobStep& step,
                                  std::int64_t now_ms) {
  nlohmann::ordered_json out;
  out["id"] = StepDisplayId(job, step);
  out["name"] = step.name();
  out["state"] = step.state();
  out["nodes"] = step.nodes();
  out["tasks"] = step.tasks();
  out["exit_code"] = step.exit_code();
  out["exit_signal"] = step.exit_signal();
  out["start_time_ms"] = step.start_time_ms();
  out["end_time_ms"] = step.end_time_ms() > 0 ? nlohmann::ordered_json(step.end_time_ms())
                                              : nlohmann::ordered_json();
  out["elapsed_s"] = StepElapsedSeconds(step, now_ms);
  out["reason"] = step.reason();
  out["max_rss_kb"] = step.max_rss_kb();
  out["total_cpu_ms"] = step.total_cpu_ms();
  return out;
}

}  // namespace cohort::cli
