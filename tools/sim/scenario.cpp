// SPDX-License-Identifier: Apache-2.0
#include "scenario.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/array_spec.h"
#include "cohort/text/dependency.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"
#include "raw_inputs.h"

namespace cohort::sim {
namespace {

using std::chrono::seconds;

// Virtual time starts here (2023-11-14), so that no time is 0.
constexpr Millis kEpoch{1'700'000'000'000};
// The longest scenario: it is played a second at a time.
constexpr seconds kLongestRun{30 * 24 * 3600};

// What the runner plays for a job's ranks, beside the engine's request.
struct Behaviour {
  seconds runtime{60};
  int checkpoint_after = -1;     ///< checkpoint-done this long after the warning; -1: never
  bool dies_on_warning = false;  ///< its ranks die of the preemption warning
};

// One line of events: `at T VERB ARGS…`.
struct Event {
  seconds at{0};
  int line = 0;
  std::string verb;
  std::vector<std::string> args;  ///< positional and key=value, in order
};

absl::Status LineError(std::string_view origin, int line, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}", origin, line, what));
}

std::optional<std::int64_t> Number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// An event's arguments: `job` (the first positional one) and key=value.
struct Args {
  std::string positional;
  std::map<std::string, std::string, std::less<>> named;
  std::set<std::string, std::less<>> flags;
};

// The whole scenario, read.
struct Script {
  std::string topology;
  std::string config;
  std::vector<Event> events;
  seconds horizon{0};
  /// `agents: script`: the lines speak for the agents and the clock (a
  /// recorded run); the runner plays nothing.
  bool agents_scripted = false;
};

absl::StatusOr<Script> Read(std::string_view text, std::string_view origin) {
  Script script;
  std::istringstream in{std::string(text)};
  std::string raw;
  int number = 0;
  bool ran = false;
  while (std::getline(in, raw)) {
    ++number;
    std::string line = raw.substr(0, raw.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.pop_back();
    }
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    line.erase(0, start);
    if (ran) return LineError(origin, number, "nothing may follow `run`; it ends the scenario");
    if (line.starts_with("topology:")) {
      script.topology += line.substr(9) + "\n";
      continue;
    }
    if (line.starts_with("config:")) {
      script.config += line.substr(7) + "\n";
      continue;
    }
    if (line.starts_with("agents:")) {
      const std::string who = line.substr(line.find_first_not_of(" \t", 7));
      if (who != "script" && who != "runner") {
        return LineError(origin, number,
                         fmt::format("agents: {}: give `runner` (the runner plays the agents, "
                                     "the default) or `script` (the lines do)",
                                     who));
      }
      script.agents_scripted = who == "script";
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> parts;
    for (std::string word; words >> word;) parts.push_back(word);
    if (parts[0] == "run" && parts.size() == 2 && Number(parts[1]) && *Number(parts[1]) > 0) {
      script.horizon = seconds(*Number(parts[1]));
      if (script.horizon > kLongestRun) {
        return LineError(origin, number,
                         fmt::format("run {}: a scenario plays at most {} s (30 days), a second "
                                     "at a time; play less",
                                     parts[1], kLongestRun.count()));
      }
      if (!script.events.empty() && script.events.back().at > script.horizon) {
        return LineError(origin, number,
                         fmt::format("run {} ends before the last event (at {}); run longer",
                                     parts[1], script.events.back().at.count()));
      }
      ran = true;
      continue;
    }
    if (parts[0] != "at" || parts.size() < 3 || !Number(parts[1]) || *Number(parts[1]) < 0) {
      return LineError(origin, number,
                       fmt::format("cannot read `{}`; a line is `topology: …`, `config: …`, "
                                   "`at SECONDS VERB [ARGS]` or, last, `run SECONDS`",
                                   line));
    }
    Event event{seconds(*Number(parts[1])), number, parts[2], {parts.begin() + 3, parts.end()}};
    if (!script.events.empty() && event.at < script.events.back().at) {
      return LineError(origin, number,
                       fmt::format("at {} comes before the line above it (at {}); put the lines "
                                   "in time order",
                                   event.at.count(), script.events.back().at.count()));
    }
    script.events.push_back(std::move(event));
  }
  if (!ran)
    return LineError(origin, number, "the scenario has no `run SECONDS` line; end it with one");
  if (script.config.empty()) {
    return LineError(origin, 1, "no `config:` line; give the cluster's NodeName and PartitionName");
  }
  return script;
}

// The engine, a clock, and agents that do what it says.
class Runner {
 public:
  Runner(ScenarioCluster cluster, bool agents_scripted)
      : config_(std::move(cluster.config)),
        topology_(std::move(cluster.topology)),
        engine_(config_, *topology_, std::move(cluster.pool)),
        agents_scripted_(agents_scripted) {}

  absl::Status Start() {
    if (agents_scripted_) return absl::OkStatus();  // the script registers the nodes
    for (NodeId n = 0; n < topology_->NodeCount(); ++n) {
      const config::NodeSpec& spec = config_.nodes[static_cast<std::size_t>(n)];
      NodeReport report;
      report.cpus = spec.cpus;
      report.memory_mb = spec.memory_mb;
      report.gpus = spec.gpus;
      Effects effects;
      if (absl::Status s = engine_.Apply(input::NodeRegistered{n, report}, now_, effects);
          !s.ok()) {
        return s;
      }
      Play(effects);
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Script& script, std::string_view origin) {
    std::size_t next = 0;
    for (seconds t{0}; t <= script.horizon; ++t) {
      now_ = kEpoch + t;
      for (; next < script.events.size() && script.events[next].at <= t; ++next) {
        if (absl::Status s = Do(script.events[next], origin); !s.ok()) return s;
        if (!agents_scripted_) continue;
        // A recorded run is checked after every input, as it was recorded.
        if (absl::Status ok = engine_.CheckInvariants(); !ok.ok()) {
          return absl::InternalError(fmt::format("{}:{}: the engine broke an invariant: {}", origin,
                                                 script.events[next].line, ok));
        }
      }
      if (agents_scripted_) continue;
      Effects effects;
      for (auto it = ends_.begin(); it != ends_.end();) {
        if (it->second > now_) {
          ++it;
          continue;
        }
        const JobId id = it->first;
        it = ends_.erase(it);
        ExitAll(id, 0, 0, effects);
      }
      for (auto it = checkpoints_.begin(); it != checkpoints_.end();) {
        if (it->second > now_) {
          ++it;
          continue;
        }
        Log(fmt::format("job {} says checkpoint done", Name(it->first)));
        Input(input::CheckpointDone{JobRef{it->first, -1}, Caller{}}, effects, "checkpoint-done");
        it = checkpoints_.erase(it);
      }
      for (NodeId n = 0; n < topology_->NodeCount(); ++n) {
        if (!silent_.contains(n)) Input(input::Heartbeat{n}, effects, "heartbeat");
      }
      Input(input::Tick{}, effects, "tick");
      Play(effects);
      if (engine_.ScheduleNeeded()) {
        Effects pass;
        Input(input::Schedule{}, pass, "schedule");
        Play(pass);
      }
      if (absl::Status ok = engine_.CheckInvariants(); !ok.ok()) {
        return absl::InternalError(
            fmt::format("{}: the engine broke an invariant at t={}s: {}", origin, t.count(), ok));
      }
    }
    return absl::OkStatus();
  }

  [[nodiscard]] const std::string& Transcript() const { return transcript_; }

 private:
  void Log(std::string_view line) {
    transcript_ += fmt::format("t={}s {}\n", (now_ - kEpoch).count() / 1000, line);
  }

  std::string Name(JobId id) const {
    const Job* job = engine_.FindJob(id);
    return job != nullptr ? DisplayId(*job) : std::to_string(id);
  }

  static std::string StatusName(const JobStatus& status) {
    return status.sub == JobSubstate::kNone
               ? std::string(JobStateName(status.state))
               : fmt::format("{}/{}", JobStateName(status.state), JobSubstateName(status.sub));
  }

  // Hands one input to the engine; a refusal is part of the transcript.
  void Input(const EngineInput& in, Effects& effects, std::string_view what,
             JobId* submitted = nullptr) {
    if (absl::Status s = engine_.Apply(in, now_, effects, submitted); !s.ok()) {
      Log(fmt::format("{} refused: {}", what, s.message()));
    }
  }

  absl::StatusOr<JobRef> JobOf(const Event& event, const Args& args, std::string_view origin) {
    const std::optional<JobRef> ref = ReadJobRef(args.positional);
    if (!ref) {
      return LineError(origin, event.line,
                       fmt::format("`{}` needs a job id first, as `at 10 {} 3` (or 3_1, a task "
                                   "of an array)",
                                   event.verb, event.verb));
    }
    return *ref;
  }

  absl::StatusOr<NodeId> NodeOf(const Event& event, const Args& args, std::string_view origin) {
    const std::optional<NodeId> node = topology_->FindNode(args.positional);
    if (!node) {
      return LineError(origin, event.line,
                       fmt::format("`{}` needs a node of the cluster first; `{}` is none",
                                   event.verb, args.positional));
    }
    return *node;
  }

  static Caller CallerOf(const Args& args) {
    Caller caller;  // root, unless `as=UID`
    if (const auto as = args.named.find("as"); as != args.named.end()) {
      caller.uid = static_cast<std::uint32_t>(Number(as->second).value_or(0));
    }
    return caller;
  }

  absl::Status Do(const Event& event, std::string_view origin) {
    Args args;
    for (auto it = event.args.begin(); it != event.args.end(); ++it) {
      const std::string& arg = *it;
      const std::size_t eq = arg.find('=');
      if (arg.starts_with("reason=")) {
        // The rest of the line, spaces and all, as raw_inputs.h reads it.
        std::string reason = arg.substr(eq + 1);
        for (++it; it != event.args.end(); ++it) reason += " " + *it;
        args.named["reason"] = std::move(reason);
        break;
      }
      if (eq != std::string::npos) {
        args.named[arg.substr(0, eq)] = arg.substr(eq + 1);
      } else if (args.positional.empty() && event.verb != "submit") {
        args.positional = arg;
      } else {
        args.flags.insert(arg);
      }
    }
    Effects effects;
    const std::string& verb = event.verb;
    if (verb == "submit") {
      absl::StatusOr<std::pair<JobRequest, Behaviour>> job = SubmissionOf(event, args, origin);
      if (!job.ok()) return job.status();
      JobId id = 0;
      Input(input::Submit{job->first}, effects, "submit", &id);
      if (id != 0) behaviour_[id] = job->second;
    } else if (verb == "cancel" || verb == "hold" || verb == "release" || verb == "requeue" ||
               verb == "checkpoint-done") {
      absl::StatusOr<JobRef> job = JobOf(event, args, origin);
      if (!job.ok()) return job.status();
      const JobRef ref = *job;
      const Caller caller = CallerOf(args);
      const std::string what = fmt::format("{} {}", verb, FormatJobRef(ref));
      if (verb == "cancel") {
        const int signal = static_cast<int>(Number(args.named["signal"]).value_or(0));
        Input(input::Cancel{ref, signal, caller}, effects, what);
      } else if (verb == "hold") {
        Input(input::Hold{ref, caller}, effects, what);
      } else if (verb == "release") {
        Input(input::Release{ref, caller}, effects, what);
      } else if (verb == "requeue") {
        Input(input::Requeue{ref, caller}, effects, what);
      } else {
        Input(input::CheckpointDone{ref, caller}, effects, what);
      }
    } else if (verb == "exit" || verb == "fail") {
      // Every rank of the job exits with `code` (and `signal`); a failing
      // job's other ranks are then stopped by the engine.
      absl::StatusOr<JobRef> job = JobOf(event, args, origin);
      if (!job.ok()) return job.status();
      const JobId id = job->job;
      const int code =
          static_cast<int>(Number(args.named["code"]).value_or(verb == "fail" ? 1 : 0));
      const int signal = static_cast<int>(Number(args.named["signal"]).value_or(0));
      Log(fmt::format("job {} ranks exit with code {}{}", Name(id), code,
                      signal != 0 ? fmt::format(" by signal {}", signal) : ""));
      ends_.erase(id);
      ExitAll(id, code, signal, effects);
    } else if (verb == "drain" || verb == "down" || verb == "resume" || verb == "lose" ||
               verb == "return") {
      absl::StatusOr<NodeId> node = NodeOf(event, args, origin);
      if (!node.ok()) return node.status();
      const std::string what = fmt::format("{} {}", verb, args.positional);
      if (verb == "drain") {
        const std::string reason = args.named.contains("reason") ? args.named["reason"] : "test";
        Input(input::Drain{*node, reason, CallerOf(args)}, effects, what);
      } else if (verb == "down") {
        const std::string reason = args.named.contains("reason") ? args.named["reason"] : "test";
        Input(input::Down{*node, reason, CallerOf(args)}, effects, what);
      } else if (verb == "resume") {
        Input(input::Resume{*node, CallerOf(args)}, effects, what);
      } else if (verb == "lose") {
        Log(fmt::format("node {} falls silent", args.positional));
        silent_.insert(*node);
      } else {
        // Its agent comes back: it registers again, with what still runs.
        Log(fmt::format("node {} registers again", args.positional));
        silent_.erase(*node);
        const config::NodeSpec& spec = config_.nodes[static_cast<std::size_t>(*node)];
        NodeReport report;
        report.cpus = spec.cpus;
        report.memory_mb = spec.memory_mb;
        report.gpus = spec.gpus;
        Input(input::NodeRegistered{*node, report}, effects, what);
      }
    } else if (std::optional<absl::StatusOr<EngineInput>> raw =
                   ReadInput(verb, event.args, *topology_)) {
      if (!raw->ok()) return LineError(origin, event.line, std::string(raw->status().message()));
      Input(**raw, effects, verb);
    } else {
      return LineError(
          origin, event.line,
          fmt::format("no verb `{}`; the verbs: submit, cancel, hold, release, "
                      "requeue, checkpoint-done, exit, fail, drain, down, resume, lose, "
                      "return, and for the agents and the clock register, "
                      "heartbeat, tick, schedule, rank-exited, released, "
                      "launch-failed, step, signal-step, step-rank-exited, "
                      "end-allocation",
                      verb));
    }
    Play(effects);
    return absl::OkStatus();
  }

  absl::StatusOr<std::pair<JobRequest, Behaviour>> SubmissionOf(const Event& event, Args& args,
                                                                std::string_view origin) {
    JobRequest r;
    Behaviour b;
    r.name = "job";
    r.user_name = "user";
    r.uid = 1000;
    for (const std::string& flag : args.flags) {
      if (flag == "hold") {
        r.hold = true;
      } else if (flag == "exclusive") {
        r.exclusivity = alloc::Exclusivity::kExclusive;
      } else if (flag == "exclusive-topo") {
        r.exclusivity = alloc::Exclusivity::kTopo;
      } else if (flag == "requeue") {
        r.requeue = true;
      } else if (flag == "dies-on-warning") {
        b.dies_on_warning = true;
      } else if (flag == "kill-on-invalid-dep") {
        r.kill_on_invalid_dep = true;
      } else {
        return LineError(origin, event.line,
                         fmt::format("submit: no flag `{}`; the flags: hold, exclusive, "
                                     "exclusive-topo, requeue, "
                                     "dies-on-warning, kill-on-invalid-dep",
                                     flag));
      }
    }
    for (const auto& entry : args.named) {
      const std::string& key = entry.first;  // named, not bound: lambdas below use them
      const std::string& value = entry.second;
      const std::optional<std::int64_t> n = Number(value);
      const auto need_number = [&]() -> absl::Status {
        if (n && *n >= 0) return absl::OkStatus();
        return LineError(origin, event.line,
                         fmt::format("submit {}={}: give a whole number", key, value));
      };
      if (key == "nodes" || key == "gpus" || key == "tasks" || key == "cpus" || key == "runtime" ||
          key == "uid" || key == "switches" || key == "checkpoint" || key == "begin" ||
          key == "restarts" || key == "spares") {
        if (absl::Status s = need_number(); !s.ok()) return s;
      }
      // The bounds the controller holds a submission to (cohort/job.h).
      const int most = key == "nodes" || key == "spares" ? kMaxJobNodes
                       : key == "tasks"                  ? kMaxTasksPerNode
                       : key == "cpus"                   ? kMaxCpusPerTask
                       : key == "gpus"                   ? kMaxGpusPerNode
                                                         : -1;
      if (most >= 0 && *n > most) {
        return LineError(
            origin, event.line,
            fmt::format("submit {}={}: at most {}, as for any submission", key, value, most));
      }
      if (key == "restarts" && *n > config::ClusterConfig::kMaxRestarts) {
        return LineError(origin, event.line,
                         fmt::format("submit restarts={}: at most {}, as --max-restarts", value,
                                     config::ClusterConfig::kMaxRestarts));
      }
      if ((key == "runtime" || key == "checkpoint" || key == "begin") && *n > kLongestRun.count()) {
        return LineError(origin, event.line,
                         fmt::format("submit {}={}: at most {} s, the longest scenario", key, value,
                                     kLongestRun.count()));
      }
      if (key == "nodes") {
        r.nodes = static_cast<int>(*n);
      } else if (key == "gpus") {
        r.gpus_per_node = static_cast<int>(*n);
      } else if (key == "tasks") {
        r.tasks_per_node = static_cast<int>(*n);
      } else if (key == "cpus") {
        r.cpus_per_task = static_cast<int>(*n);
      } else if (key == "runtime") {
        b.runtime = seconds(*n);
      } else if (key == "checkpoint") {
        b.checkpoint_after = static_cast<int>(*n);
      } else if (key == "uid") {
        r.uid = static_cast<std::uint32_t>(*n);
      } else if (key == "restarts") {
        r.max_restarts = static_cast<int>(*n);
      } else if (key == "spares") {
        r.spares = static_cast<int>(*n);
      } else if (key == "restart-policy") {
        const std::optional<RestartPolicy> policy = ParseRestartPolicy(value);
        if (!policy) {
          return LineError(origin, event.line,
                           fmt::format("submit restart-policy={}: give job or step", value));
        }
        r.restart_policy = *policy;
      } else if (key == "switches") {
        r.switches = static_cast<int>(*n);
      } else if (key == "begin") {
        r.begin = kEpoch + seconds(*n);
      } else if (key == "time") {
        absl::StatusOr<seconds> limit = ParseSlurmTime(value);
        if (!limit.ok()) {
          return LineError(origin, event.line,
                           fmt::format("submit time={}: {}", value, limit.status().message()));
        }
        r.time_limit = *limit;
      } else if (key == "launch") {
        if (value == "batch") {
          r.launch = JobLaunch::kBatchScript;
        } else if (value == "allocation") {
          r.launch = JobLaunch::kAllocation;
        } else if (value != "ranks") {
          return LineError(origin, event.line,
                           fmt::format("submit launch={}: give ranks (the command on every "
                                       "rank, the default), batch or allocation",
                                       value));
        }
      } else if (key == "name") {
        r.name = value;
      } else if (key == "user") {
        r.user_name = value;
      } else if (key == "account") {
        r.account = value;
      } else if (key == "partition") {
        r.partition = value;
      } else if (key == "qos") {
        r.qos = value;
      } else if (key == "nodelist" || key == "exclude") {
        std::vector<std::string>& names = key == "nodelist" ? r.nodelist : r.exclude;
        std::istringstream list(value);
        for (std::string name; std::getline(list, name, ',');) names.push_back(name);
      } else if (key == "after") {
        absl::StatusOr<Dependency> dependency = ParseDependency(value);
        if (!dependency.ok()) {
          return LineError(
              origin, event.line,
              fmt::format("submit after={}: {}", value, dependency.status().message()));
        }
        r.dependency = *std::move(dependency);
      } else if (key == "array") {
        absl::StatusOr<ArraySpec> array = ParseArraySpec(value, config_.max_array_size);
        if (!array.ok()) {
          return LineError(origin, event.line,
                           fmt::format("submit array={}: {}", value, array.status().message()));
        }
        r.array = *std::move(array);
      } else {
        return LineError(origin, event.line,
                         fmt::format("submit: no key `{}`; the keys: nodes, gpus, tasks, cpus, "
                                     "runtime, time, name, user, uid, account, partition, qos, "
                                     "nodelist, exclude, after, array, switches, begin, "
                                     "checkpoint, launch, restarts, spares, restart-policy",
                                     key));
      }
    }
    return std::pair{std::move(r), b};
  }

  void ExitAll(JobId id, int code, int signal, Effects& effects) {
    const Job* job = engine_.FindJob(id);
    if (job == nullptr) return;
    // A silent node's agent reports nothing (the engine counts its ranks
    // lost with the node).
    std::vector<alloc::NodeGrant> grants = job->run.placement.grants;
    std::erase_if(grants, [&](const alloc::NodeGrant& g) { return silent_.contains(g.node); });
    const int ranks = OwnRanksOn(*job, 0);
    for (const alloc::NodeGrant& g : grants) {
      for (int r = 0; r < std::max(ranks, 1); ++r) {
        Input(input::RankExited{id, g.node, code, signal}, effects, "exit");
      }
    }
    for (const alloc::NodeGrant& g : grants) {
      Input(input::JobReleased{id, g.node}, effects, "release");
    }
  }

  // Writes what the engine decided and plays the agents' part in it.
  void Play(Effects& effects) {
    for (const JobTransition& t : effects.transitions) {
      const Job* job = engine_.FindJob(t.job);
      const std::string name = Name(t.job);
      if (!t.from) {
        Log(fmt::format("job {} submitted: {}", name, StatusName(t.to)));
        continue;
      }
      std::string line = fmt::format("job {} {} -> {} ({})", name, StatusName(*t.from),
                                     StatusName(t.to), t.event ? JobEventName(*t.event) : "");
      if (job != nullptr && t.to.state == JobState::kRunning &&
          t.from->state == JobState::kPending) {
        std::vector<std::string> nodes;
        for (const alloc::NodeGrant& g : job->run.placement.grants) {
          nodes.push_back(topology_->NodeName(g.node));
        }
        line += fmt::format(" on {}", hostlist::Compress(nodes));
      }
      if (job != nullptr && IsFinished(t.to.state) && !job->reason.empty() &&
          t.to.state != JobState::kCompleted) {
        line += fmt::format(": {}", job->reason);
      }
      Log(line);
    }
    for (const JobId id : effects.changed_jobs) {
      const Job* job = engine_.FindJob(id);
      if (job == nullptr) continue;
      std::size_t& repairs = repairs_[id];
      for (; repairs < job->repairs.size(); ++repairs) {
        const RepairRecord& r = job->repairs[repairs];
        Log(fmt::format("job {} repaired: {} replaced by {}; started {}", DisplayId(*job),
                        fmt::join(r.lost, ","), fmt::join(r.replacement, ","), r.restarted));
      }
      if (job->state != JobState::kPending || job->wait.reason == PendingReason::kNone) {
        continue;
      }
      const std::string why = job->reason_detail.empty()
                                  ? job->reason
                                  : fmt::format("{}: {}", job->reason, job->reason_detail);
      std::string& said = reasons_[id];
      if (why != said) {
        said = why;
        Log(fmt::format("job {} waits: {}", DisplayId(*job), why));
      }
    }
    if (agents_scripted_) {  // the script speaks for the agents
      effects = {};
      return;
    }
    std::vector<JobId> stopped;
    std::vector<JobId> died;
    for (const Command& c : effects.commands) {
      if (const auto* launch = std::get_if<LaunchCommand>(&c)) {
        if (launch->node_rank != 0 || launch->step) continue;
        const Job* job = engine_.FindJob(launch->job);
        if (job == nullptr) continue;
        const JobId spec = job->array.job_id != 0 ? job->array.job_id : job->id;
        ends_[launch->job] = now_ + behaviour_[spec].runtime;
      } else if (const auto* sig = std::get_if<SignalCommand>(&c)) {
        const std::string_view name = sig->signal == SIGUSR1   ? "USR1"
                                      : sig->signal == SIGSTOP ? "STOP"
                                      : sig->signal == SIGCONT ? "CONT"
                                                               : "";
        Log(fmt::format("signal {} to job {} on {}",
                        name.empty() ? std::to_string(sig->signal) : std::string(name),
                        Name(sig->job), topology_->NodeName(sig->node)));
        const Job* job = engine_.FindJob(sig->job);
        const JobId spec = job != nullptr && job->array.job_id != 0 ? job->array.job_id : sig->job;
        const Behaviour& b = behaviour_[spec];
        if (sig->signal == SIGUSR1 && b.checkpoint_after >= 0 && !checkpoints_.contains(sig->job)) {
          checkpoints_[sig->job] = now_ + seconds(b.checkpoint_after);
        }
        if (sig->signal == SIGUSR1 && b.dies_on_warning) died.push_back(sig->job);
      } else if (const auto* term = std::get_if<TerminateCommand>(&c)) {
        if (std::find(stopped.begin(), stopped.end(), term->job) == stopped.end()) {
          stopped.push_back(term->job);
        }
      }
    }
    effects = {};
    for (const JobId id : died) {
      ends_.erase(id);
      Effects more;
      ExitAll(id, 0, SIGUSR1, more);
      Play(more);
    }
    for (const JobId id : stopped) {
      ends_.erase(id);
      checkpoints_.erase(id);
      Effects more;
      ExitAll(id, 0, SIGTERM, more);
      Play(more);
    }
  }

  config::ClusterConfig config_;
  std::unique_ptr<topology::Topology> topology_;
  Engine engine_;
  Millis now_ = kEpoch;
  std::map<JobId, Behaviour> behaviour_;
  std::map<JobId, Millis> ends_;
  std::map<JobId, Millis> checkpoints_;
  std::map<JobId, std::string> reasons_;
  std::map<JobId, std::size_t> repairs_;  ///< repairs already written, by job
  std::set<NodeId> silent_;
  std::string transcript_;
  const bool agents_scripted_;
};

}  // namespace

absl::StatusOr<ScenarioCluster> BuildCluster(std::string_view config_text,
                                             std::string_view topology_text,
                                             std::string_view origin) {
  const config::FileLoader no_files = [](const std::string& path) -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError(fmt::format(
        "{}: a scenario reads no other file; write its lines as `config:` lines", path));
  };
  config::ConfigResult parsed = config::ParseClusterConfig(config_text, origin, no_files);
  if (parsed.diagnostics.HasErrors()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: its config: lines have errors:\n{}", origin, parsed.diagnostics.Format()));
  }
  std::vector<std::string> names;
  for (const config::NodeSpec& node : parsed.config.nodes) names.push_back(node.name);
  std::unique_ptr<topology::Topology> topology;
  if (topology_text.empty()) {
    topology = std::make_unique<topology::Topology>(topology::FlatTopology(names));
  } else {
    topology::TopologyResult built =
        topology::BuildTopology(topology_text, origin, names, topology::NodeSource::kConfig);
    if (built.diagnostics.HasErrors()) {
      return absl::InvalidArgumentError(fmt::format("{}: its topology: lines have errors:\n{}",
                                                    origin, built.diagnostics.Format()));
    }
    topology = std::make_unique<topology::Topology>(std::move(built.topology));
  }
  absl::StatusOr<alloc::NodePool> pool =
      alloc::NodePool::Create(*topology, parsed.config.nodes, parsed.config.partitions);
  if (!pool.ok()) return pool.status();
  return ScenarioCluster{std::move(parsed.config), std::move(topology), *std::move(pool)};
}

absl::StatusOr<std::string> RunScenario(std::string_view text, std::string_view origin) {
  absl::StatusOr<Script> script = Read(text, origin);
  if (!script.ok()) return script.status();
  absl::StatusOr<ScenarioCluster> cluster = BuildCluster(script->config, script->topology, origin);
  if (!cluster.ok()) return cluster.status();
  Runner runner(*std::move(cluster), script->agents_scripted);
  if (absl::Status s = runner.Start(); !s.ok()) return s;
  if (absl::Status s = runner.Run(*script, origin); !s.ok()) return s;
  return runner.Transcript();
}

}  // namespace cohort::sim
