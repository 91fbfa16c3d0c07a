// SPDX-License-Identifier: Apache-2.0
#include "raw_inputs.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <type_traits>
#include <utility>
#include <variant>

#include "cohort/text/array_spec.h"
#include "cohort/text/dependency.h"
#include "cohort/text/slurm_time.h"

namespace cohort::sim {
namespace {

using std::chrono::seconds;

std::string_view SharingName(alloc::StepSharing sharing) {
  switch (sharing) {
    case alloc::StepSharing::kWholeNodes:
      return "whole";
    case alloc::StepSharing::kExact:
      return "exact";
    case alloc::StepSharing::kOverlap:
      return "overlap";
  }
  return "whole";
}

std::string_view LaunchName(JobLaunch launch) {
  switch (launch) {
    case JobLaunch::kEveryRank:
      return "ranks";
    case JobLaunch::kBatchScript:
      return "batch";
    case JobLaunch::kAllocation:
      return "allocation";
  }
  return "ranks";
}

std::string SubmitLine(const JobRequest& r) {
  // What a scenario's submit line can say; the rest (features, memory,
  // warnings, GPU types, deadlines) a recorded run does not use.
  std::string line =
      fmt::format("submit name={} user={} uid={} nodes={} tasks={} cpus={} gpus={}", r.name,
                  r.user_name, r.uid, r.nodes, r.tasks_per_node, r.cpus_per_task, r.gpus_per_node);
  if (r.time_limit.count() > 0) line += fmt::format(" time={}", FormatSlurmTime(r.time_limit));
  if (!r.partition.empty()) line += fmt::format(" partition={}", r.partition);
  if (!r.account.empty()) line += fmt::format(" account={}", r.account);
  if (!r.qos.empty()) line += fmt::format(" qos={}", r.qos);
  if (r.switches > 0) line += fmt::format(" switches={}", r.switches);
  if (r.launch != JobLaunch::kEveryRank) line += fmt::format(" launch={}", LaunchName(r.launch));
  if (!r.array.tasks.empty()) {
    line += fmt::format(" array={}", FormatArrayTasks(r.array.tasks, r.array.max_running));
  }
  if (!r.dependency.terms.empty()) line += fmt::format(" after={}", FormatDependency(r.dependency));
  if (r.hold) line += " hold";
  if (r.requeue) line += " requeue";
  if (r.max_restarts >= 0) line += fmt::format(" restarts={}", r.max_restarts);
  if (r.spares > 0) line += fmt::format(" spares={}", r.spares);
  if (r.restart_policy != RestartPolicy::kJob) {
    line += fmt::format(" restart-policy={}", RestartPolicyName(r.restart_policy));
  }
  if (r.exclusivity == alloc::Exclusivity::kExclusive) line += " exclusive";
  if (r.exclusivity == alloc::Exclusivity::kTopo) line += " exclusive-topo";
  if (r.kill_on_invalid_dep) line += " kill-on-invalid-dep";
  return line;
}

std::string As(const Caller& caller) { return fmt::format("as={}", caller.uid); }

// A line's words after its verb: positional ones in order, then key=value.
struct Words {
  std::vector<std::string> positional;
  std::map<std::string, std::string, std::less<>> named;
};

Words Split(const std::vector<std::string>& words) {
  Words out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) {
      out.positional.push_back(word);
      continue;
    }
    std::string key = word.substr(0, eq);
    std::string value = word.substr(eq + 1);
    if (key == "reason") {  // the rest of the line, spaces and all
      for (++i; i < words.size(); ++i) value += " " + words[i];
    }
    out.named[std::move(key)] = std::move(value);
  }
  return out;
}

std::optional<std::int64_t> Whole(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Reads the positional and named words of one verb's line.
class LineReader {
 public:
  LineReader(std::string_view verb, const std::vector<std::string>& words,
             const topology::Topology& topology)
      : verb_(verb), words_(Split(words)), topology_(topology) {}

  absl::StatusOr<JobRef> Job(std::size_t at) const {
    const std::optional<JobRef> ref =
        at < words_.positional.size() ? ReadJobRef(words_.positional[at]) : std::nullopt;
    if (!ref) return Error(fmt::format("give a job id as word {}, as 12 or 12_3", at + 1));
    return *ref;
  }
  absl::StatusOr<NodeId> Node(std::size_t at) const {
    const std::optional<NodeId> node =
        at < words_.positional.size() ? topology_.FindNode(words_.positional[at]) : std::nullopt;
    if (!node) return Error(fmt::format("give a node of the cluster as word {}", at + 1));
    return *node;
  }
  absl::StatusOr<int> Int(std::size_t at) const {
    const std::optional<std::int64_t> n =
        at < words_.positional.size() ? Whole(words_.positional[at]) : std::nullopt;
    if (!n || *n < 0 || *n > 1'000'000) {
      return Error(fmt::format("give a number 0 to 1000000 as word {}", at + 1));
    }
    return static_cast<int>(*n);
  }
  // A named number, `fallback` when absent.
  absl::StatusOr<int> Named(std::string_view key, int fallback) const {
    absl::StatusOr<std::int64_t> n = Named64(key, fallback, 1'000'000);
    if (!n.ok()) return n.status();
    return static_cast<int>(*n);
  }
  absl::StatusOr<std::int64_t> Named64(std::string_view key, std::int64_t fallback,
                                       std::int64_t most) const {
    const auto it = words_.named.find(key);
    if (it == words_.named.end()) return fallback;
    const std::optional<std::int64_t> n = Whole(it->second);
    if (!n || *n < -1 || *n > most) {
      return Error(fmt::format("{}={}: give a number -1 to {}", key, it->second, most));
    }
    return *n;
  }
  absl::StatusOr<Caller> Who() const {
    absl::StatusOr<int> uid = Named("as", 0);
    if (!uid.ok()) return uid.status();
    return Caller{static_cast<std::uint32_t>(std::max(*uid, 0))};
  }
  std::string Text(std::string_view key) const {
    const auto it = words_.named.find(key);
    return it == words_.named.end() ? std::string() : it->second;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}: {}", verb_, what));
  }

 private:
  std::string verb_;
  Words words_;
  const topology::Topology& topology_;
};

// Leaves Read with the error of a StatusOr, else names the StatusOr.
#define COHORT_TAKE(name, expr) \
  auto name = (expr);           \
  if (!(name).ok()) return (name).status()

absl::StatusOr<EngineInput> Read(std::string_view verb, const LineReader& in) {
  if (verb == "tick") return input::Tick{};
  if (verb == "schedule") return input::Schedule{};
  if (verb == "heartbeat") {
    COHORT_TAKE(node, in.Node(0));
    return input::Heartbeat{*node};
  }
  if (verb == "register") {
    COHORT_TAKE(node, in.Node(0));
    COHORT_TAKE(cpus, in.Named("cpus", 1));
    COHORT_TAKE(gpus, in.Named("gpus", 0));
    COHORT_TAKE(memory, in.Named64("memory", 1, std::int64_t{1} << 40));  // MiB
    input::NodeRegistered out{*node, {}};
    out.report.cpus = *cpus;
    out.report.gpus = *gpus;
    out.report.memory_mb = *memory;
    const std::string running = in.Text("running");
    std::size_t start = 0;
    while (start < running.size()) {
      std::size_t comma = running.find(',', start);
      if (comma == std::string::npos) comma = running.size();
      const std::string_view item = std::string_view(running).substr(start, comma - start);
      const std::size_t colon = item.find(':');
      const std::optional<std::int64_t> job = Whole(item.substr(0, colon));
      const std::optional<std::int64_t> attempt = colon == std::string_view::npos
                                                      ? std::optional<std::int64_t>(0)
                                                      : Whole(item.substr(colon + 1));
      if (!job || !attempt || *job <= 0 || *attempt < 0 || *attempt > 1'000'000) {
        return in.Error(fmt::format("running={}: give JOB:ATTEMPT,…", running));
      }
      out.report.running.push_back({*job, static_cast<int>(*attempt), 0, std::nullopt});
      start = comma + 1;
    }
    return out;
  }
  if (verb == "rank-exited" || verb == "released" || verb == "launch-failed") {
    COHORT_TAKE(job, in.Job(0));
    COHORT_TAKE(node, in.Node(1));
    if (verb == "released") return input::JobReleased{job->job, *node};
    if (verb == "launch-failed") return input::LaunchFailed{job->job, *node, in.Text("reason")};
    COHORT_TAKE(code, in.Named("code", 0));
    COHORT_TAKE(signal, in.Named("signal", 0));
    return input::RankExited{job->job, *node, *code, *signal};
  }
  if (verb == "step") {
    COHORT_TAKE(job, in.Job(0));
    COHORT_TAKE(who, in.Who());
    COHORT_TAKE(nodes, in.Named("nodes", 0));
    COHORT_TAKE(tasks, in.Named("tasks", 0));
    COHORT_TAKE(gpus, in.Named("gpus", -1));
    input::StartStep out{*job, {}, *who};
    out.request.nodes = *nodes;
    out.request.tasks = *tasks;
    out.request.gpus_per_node = *gpus;
    const std::string sharing = in.Text("sharing");
    if (sharing == "exact") {
      out.request.sharing = alloc::StepSharing::kExact;
    } else if (sharing == "overlap") {
      out.request.sharing = alloc::StepSharing::kOverlap;
    } else if (!sharing.empty() && sharing != "whole") {
      return in.Error(fmt::format("sharing={}: give whole, exact or overlap", sharing));
    }
    return out;
  }
  if (verb == "signal-step") {
    COHORT_TAKE(job, in.Job(0));
    COHORT_TAKE(step, in.Int(1));
    COHORT_TAKE(signal, in.Named("signal", 0));
    COHORT_TAKE(who, in.Who());
    return input::SignalStep{*job, *step, *signal, *who};
  }
  if (verb == "step-rank-exited") {
    COHORT_TAKE(job, in.Job(0));
    COHORT_TAKE(step, in.Int(1));
    COHORT_TAKE(node, in.Node(2));
    COHORT_TAKE(code, in.Named("code", 0));
    COHORT_TAKE(signal, in.Named("signal", 0));
    return input::StepRankExited{job->job, *step, *node, *code, *signal};
  }
  COHORT_TAKE(job, in.Job(0));  // end-allocation
  COHORT_TAKE(code, in.Named("code", 0));
  COHORT_TAKE(who, in.Who());
  return input::EndAllocation{*job, *code, *who};
}

#undef COHORT_TAKE

}  // namespace

std::string FormatJobRef(JobRef ref) {
  return ref.task < 0 ? std::to_string(ref.job) : fmt::format("{}_{}", ref.job, ref.task);
}

std::optional<JobRef> ReadJobRef(std::string_view text) {
  const std::size_t underscore = text.find('_');
  const std::optional<std::int64_t> job = Whole(text.substr(0, underscore));
  if (!job || *job <= 0) return std::nullopt;
  if (underscore == std::string_view::npos) return JobRef{*job, -1};
  const std::optional<std::int64_t> task = Whole(text.substr(underscore + 1));
  if (!task || *task < 0 || *task > 10'000'000) return std::nullopt;
  return JobRef{*job, static_cast<int>(*task)};
}

std::string FormatInput(const EngineInput& in, seconds at, const topology::Topology& topology) {
  const auto node = [&](NodeId n) { return topology.NodeName(n); };
  const std::string line = std::visit(
      [&](const auto& i) -> std::string {
        using T = std::decay_t<decltype(i)>;
        if constexpr (std::is_same_v<T, input::Submit>) {
          return SubmitLine(i.request);
        } else if constexpr (std::is_same_v<T, input::Cancel>) {
          return fmt::format("cancel {} signal={} {}", FormatJobRef(i.job), i.signal, As(i.caller));
        } else if constexpr (std::is_same_v<T, input::Hold>) {
          return fmt::format("hold {} {}", FormatJobRef(i.job), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::Release>) {
          return fmt::format("release {} {}", FormatJobRef(i.job), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::Requeue>) {
          return fmt::format("requeue {} {}", FormatJobRef(i.job), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::CheckpointDone>) {
          return fmt::format("checkpoint-done {} {}", FormatJobRef(i.job), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::NodeRegistered>) {
          std::string text = fmt::format("register {} cpus={} gpus={} memory={}", node(i.node),
                                         i.report.cpus, i.report.gpus, i.report.memory_mb);
          for (std::size_t r = 0; r < i.report.running.size(); ++r) {
            text += fmt::format("{}{}:{}", r == 0 ? " running=" : ",", i.report.running[r].job,
                                i.report.running[r].attempt);
          }
          return text;
        } else if constexpr (std::is_same_v<T, input::Heartbeat>) {
          return fmt::format("heartbeat {}", node(i.node));
        } else if constexpr (std::is_same_v<T, input::Drain>) {
          return fmt::format("drain {} {} reason={}", node(i.node), As(i.caller), i.reason);
        } else if constexpr (std::is_same_v<T, input::Resume>) {
          return fmt::format("resume {} {}", node(i.node), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::Down>) {
          return fmt::format("down {} {} reason={}", node(i.node), As(i.caller), i.reason);
        } else if constexpr (std::is_same_v<T, input::RankExited>) {
          return fmt::format("rank-exited {} {} code={} signal={}", i.job, node(i.node),
                             i.exit_code, i.signal);
        } else if constexpr (std::is_same_v<T, input::JobReleased>) {
          return fmt::format("released {} {}", i.job, node(i.node));
        } else if constexpr (std::is_same_v<T, input::LaunchFailed>) {
          return fmt::format("launch-failed {} {} reason={}", i.job, node(i.node), i.reason);
        } else if constexpr (std::is_same_v<T, input::StartStep>) {
          return fmt::format("step {} nodes={} tasks={} gpus={} sharing={} {}", FormatJobRef(i.job),
                             i.request.nodes, i.request.tasks, i.request.gpus_per_node,
                             SharingName(i.request.sharing), As(i.caller));
        } else if constexpr (std::is_same_v<T, input::SignalStep>) {
          return fmt::format("signal-step {} {} signal={} {}", FormatJobRef(i.job), i.step,
                             i.signal, As(i.caller));
        } else if constexpr (std::is_same_v<T, input::StepRankExited>) {
          return fmt::format("step-rank-exited {} {} {} code={} signal={}", i.job, i.step,
                             node(i.node), i.exit_code, i.signal);
        } else if constexpr (std::is_same_v<T, input::EndAllocation>) {
          return fmt::format("end-allocation {} code={} {}", FormatJobRef(i.job), i.exit_code,
                             As(i.caller));
        } else if constexpr (std::is_same_v<T, input::Tick>) {
          return "tick";
        } else {
          static_assert(std::is_same_v<T, input::Schedule>);
          return "schedule";
        }
      },
      in);
  return fmt::format("at {} {}", at.count(), line);
}

std::optional<absl::StatusOr<EngineInput>> ReadInput(std::string_view verb,
                                                     const std::vector<std::string>& words,
                                                     const topology::Topology& topology) {
  static constexpr std::string_view kVerbs[] = {
      "register",      "heartbeat", "tick",        "schedule",         "rank-exited",   "released",
      "launch-failed", "step",      "signal-step", "step-rank-exited", "end-allocation"};
  if (std::find(std::begin(kVerbs), std::end(kVerbs), verb) == std::end(kVerbs)) {
    return std::nullopt;
  }
  return Read(verb, LineReader(verb, words, topology));
}

}  // namespace cohort::sim
