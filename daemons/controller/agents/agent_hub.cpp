// SPDX-License-Identifier: Apache-2.0
#include "agents/agent_hub.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/launch/launch_env.h"
#include "cohort/text/hostlist.h"
#include "controller_log.h"

namespace cohort::controller {
namespace {

constexpr std::size_t kMaxNvlinkDomain = 64;

NodeReport ReportOf(const v1::Register& message) {
  NodeReport report;
  report.cpus = message.resources().cpus();
  report.memory_mb = message.resources().memory_mb();
  report.gpus = message.resources().gpus();
  report.gpu_groups.assign(message.resources().gpu_groups().begin(),
                           message.resources().gpu_groups().end());
  for (const v1::RunningJob& r : message.running()) {
    report.running.push_back({.job = r.job_id(),
                              .attempt = r.attempt(),
                              .ranks_ok = r.ranks_ok(),
                              .step = r.has_step() ? std::optional(r.step()) : std::nullopt});
  }
  for (const v1::FinishedJob& f : message.finished()) {
    report.finished.push_back({.job = f.job_id(),
                               .attempt = f.attempt(),
                               .ranks_ok = f.ranks_ok(),
                               .failed = f.failed(),
                               .exit_code = f.exit_code(),
                               .signal = f.signal(),
                               .launch_error = f.launch_error(),
                               .step = f.has_step() ? std::optional(f.step()) : std::nullopt,
                               .ranks = f.ranks()});
  }
  return report;
}

// Min, max, count and step describe the whole array, as Slurm's do.
void SetArray(const Job& job, v1::Launch* l) {
  if (job.array.job_id == 0 || job.array.task_id < 0) return;
  l->set_array_job_id(job.array.job_id);
  l->set_array_task_id(job.array.task_id);
  if (absl::StatusOr<ArraySpec> array =
          ParseArraySpec(l->spec().array(), std::numeric_limits<int>::max());
      array.ok() && !array->tasks.empty()) {
    l->set_array_task_min(array->tasks.front());
    l->set_array_task_max(array->tasks.back());
    l->set_array_task_count(static_cast<int>(array->tasks.size()));
    l->set_array_task_step(array->step);
  }
}

// A job's environment as stored; empty (and logged) when it cannot be read.
std::optional<v1::JobSpec> StoredEnvironment(Store& store, JobId id) {
  absl::StatusOr<std::optional<v1::JobSpec>> stored = store.FindEnvironment(id);
  if (!stored.ok()) {
    Log("store")->error("environment_unreadable job={} reason=\"{}\"", id, stored.status());
    return std::nullopt;
  }
  return *std::move(stored);
}

// The job an agent's report is about, and the attempt it ran (0: an agent
// that does not say); none for a heartbeat or health.
struct ReportedRun {
  JobId job = 0;
  int attempt = 0;
};
std::optional<ReportedRun> ReportedJob(const v1::AgentMessage& message) {
  switch (message.message_case()) {
    case v1::AgentMessage::kRanksStarted:
      return ReportedRun{message.ranks_started().job_id(), message.ranks_started().attempt()};
    case v1::AgentMessage::kRankExited:
      return ReportedRun{message.rank_exited().job_id(), message.rank_exited().attempt()};
    case v1::AgentMessage::kLaunchFailed:
      return ReportedRun{message.launch_failed().job_id(), message.launch_failed().attempt()};
    case v1::AgentMessage::kJobReleased:
      return ReportedRun{message.job_released().job_id(), message.job_released().attempt()};
    case v1::AgentMessage::kScriptFailed:
      return ReportedRun{message.script_failed().job_id(), message.script_failed().attempt()};
    default:
      return std::nullopt;
  }
}

const JobStep* FindStep(const Job& job, int id) {
  for (const JobStep& step : job.run.steps) {
    if (step.id == id) return &step;
  }
  return nullptr;
}

// Where node rank `node_rank`'s ranks sit in the step; returns the step's
// first node, where its rank 0 runs (MASTER_ADDR).
NodeId SetStepLayout(const Job& job, const JobStep& step, int node_rank,
                     const topology::Topology& topology, v1::StepLayout* out) {
  std::vector<int> counts;
  std::vector<std::string> names;
  int first_rank = 0;
  for (std::size_t i = 0; i < step.placement.nodes.size(); ++i) {
    const alloc::StepNode& node = step.placement.nodes[i];
    counts.push_back(node.tasks);
    names.push_back(
        topology.NodeName(job.run.placement.grants[static_cast<std::size_t>(node.node_rank)].node));
    if (node.node_rank < node_rank) first_rank += node.tasks;
    if (node.node_rank == node_rank) {
      out->set_node_index(static_cast<int>(i));
      out->set_tasks(node.tasks);
    }
  }
  out->set_nodelist(hostlist::CompressInOrder(names));
  out->set_first_rank(first_rank);
  out->set_num_nodes(static_cast<int>(step.placement.nodes.size()));
  out->set_num_tasks(step.placement.tasks);
  out->set_tasks_per_node(launch::FormatCountsPerNode(counts));
  return job.run.placement.grants[static_cast<std::size_t>(step.placement.nodes.front().node_rank)]
      .node;
}

}  // namespace

AgentHub::AgentHub(ControllerState& state, Outbox& outbox, StoreReader& reader, EffectSink& sink,
                   Options options)
    : state_(state), outbox_(outbox), reader_(reader), sink_(sink), options_(std::move(options)) {}

void AgentHub::OnMessage(AgentLink* link, const v1::AgentMessage& message) {
  if (message.has_register_()) {
    Register(link, message.register_());
    return;
  }
  const auto known = link_nodes_.find(link);
  if (known == link_nodes_.end()) {
    link->Close(absl::FailedPreconditionError("send Register first"));
    return;
  }
  OnReport(link, known->second, message);
}

void AgentHub::OnHealth(NodeId node, const v1::NodeHealth& health, Effects& effects) {
  Engine& engine = state_.engine;
  const NodeAdmin admin = engine.Admin(node);
  const bool ours = admin.drain && admin.reason.starts_with(kHealthDrainPrefix);
  const std::string& name = state_.topology->NodeName(node);
  // The agent's health check drains and resumes a node as root would; a
  // node an operator drained stays theirs to resume.
  const Caller check{.uid = 0, .operator_listed = false};
  if (!health.healthy()) {
    const std::string reason = fmt::format("{}{}", kHealthDrainPrefix, health.reason());
    if ((admin.drain && !ours) || admin.reason == reason) return;
    Log("controller")->warn("node_unhealthy node={} reason={:?}", name, health.reason());
    (void)engine.Drain(node, reason, check, ControllerState::Now(), effects);
  } else if (ours) {
    Log("controller")->info("node_healthy node={} was={:?}", name, admin.reason);
    (void)engine.Resume(node, check, effects);
  }
}

void AgentHub::OnScriptFailed(NodeId node, const v1::ScriptFailed& failed, Millis now,
                              Effects& effects) {
  Engine& engine = state_.engine;
  const std::string& name = state_.topology->NodeName(node);
  const std::string script = failed.script() == "epilog" ? "epilog" : "prolog";
  Log("launch")->warn("{}_failed job={} node={} reason={:?}", script, failed.job_id(), name,
                      failed.reason());
  // As slurmctld: the node is drained (unless already), for its operator
  // to look at; a failed prolog sends the job back to the queue to start
  // elsewhere.
  const Caller root{.uid = 0, .operator_listed = false};
  if (!engine.Admin(node).drain) {
    (void)engine.Drain(node, fmt::format("{} failed: {}", script, failed.reason()), root, now,
                       effects);
  }
  if (script != "prolog") return;
  const Job* job = engine.FindJob(failed.job_id());
  if (job == nullptr || job->state != JobState::kRunning || job->run.attempt != failed.attempt())
    return;
  if (absl::Status requeued = engine.Requeue(JobRef{failed.job_id()}, root, now, effects);
      !requeued.ok()) {
    Log("launch")->warn("prolog_requeue_failed job={} reason={:?}", failed.job_id(),
                        std::string(requeued.message()));
  }
}

void AgentHub::OnReport(AgentLink* link, NodeId node, const v1::AgentMessage& message) {
  Engine& engine = state_.engine;
  const Millis now = ControllerState::Now();
  if (engine.ViewNode(node).status == NodeStatus::kDown) {
    // The node was declared down while this stream stayed open (its agent
    // was paused, or the network between held the connection): its jobs
    // moved on. The agent registers again, and its registration stops
    // what it still runs of them; until then the node takes nothing.
    const std::string& name = state_.topology->NodeName(node);
    Log("controller")
        ->info("agent_reregister node={} reason=\"heard from a node that is down\"", name);
    Forget(link);
    link->Close(absl::UnavailableError(
        fmt::format("node {} was declared down ({}) while this stream was open; register again",
                    name, engine.ViewNode(node).reason)));
    return;
  }
  engine.NodeHeartbeat(node, now);
  last_heard_[node] = now;
  if (const std::optional<ReportedRun> run = ReportedJob(message)) {
    const std::string& report =
        message.GetDescriptor()->FindFieldByNumber(message.message_case())->name();
    // Believed only for what the engine knows this node runs.
    if (!engine.Placed(run->job, node)) {
      Log("controller")
          ->warn(
              "agent_report_refused node={} job={} report={} reason=\"the job has no rank there\"",
              state_.topology->NodeName(node), run->job, report);
      ++refused_reports_;
      return;
    }
    // Of an attempt the job has left (ranks stopped after a requeue): not
    // news of the attempt that runs now.
    if (const Job* job = engine.FindJob(run->job);
        run->attempt != 0 && job->run.attempt != run->attempt) {
      Log("controller")
          ->debug("agent_report_stale node={} job={} report={} attempt={} current={}",
                  state_.topology->NodeName(node), run->job, report, run->attempt,
                  job->run.attempt);
      return;
    }
  }
  Effects effects;
  switch (message.message_case()) {
    case v1::AgentMessage::kRanksStarted: {
      const v1::RanksStarted& started = message.ranks_started();
      Log("launch")->debug("ranks_started job={} node={} ranks={}", started.job_id(),
                           state_.topology->NodeName(node), started.ranks_size());
      const Job* job = engine.FindJob(started.job_id());
      // `show job --ranks` shows where the job's own ranks run.
      if (job != nullptr && job->state == JobState::kRunning && !started.has_step() &&
          (started.attempt() == 0 || started.attempt() == job->run.attempt)) {
        std::vector<v1::RankBinding>& ranks = state_.bindings[started.job_id()];
        for (const v1::RankBinding& b : started.bindings()) ranks.push_back(b);
        std::sort(
            ranks.begin(), ranks.end(),
            [](const v1::RankBinding& a, const v1::RankBinding& b) { return a.rank() < b.rank(); });
      }
      break;
    }
    case v1::AgentMessage::kRankExited: {
      const v1::RankExited& e = message.rank_exited();
      engine.AddUsage(e.job_id(), e.has_step() ? std::optional(e.step()) : std::nullopt,
                      {.max_rss_kb = e.max_rss_kb(),
                       .cpu_ms = e.cpu_ms(),
                       .gpu_measured = e.has_gpu(),
                       .gpu_util_ave = e.gpu().util_ave_pct(),
                       .gpu_util_max = e.gpu().util_max_pct(),
                       .gpu_mem_max_mb = e.gpu().mem_max_mb(),
                       .gpu_mem_ave_mb = e.gpu().mem_ave_mb()});
      if (e.has_step()) {
        engine.StepRankExited(e.job_id(), e.step(), node, e.exit_code(), e.signal(), now, effects);
      } else {
        engine.RankExited(e.job_id(), node, e.exit_code(), e.signal(), now, effects);
      }
      break;
    }
    case v1::AgentMessage::kLaunchFailed: {
      const v1::LaunchFailed& e = message.launch_failed();
      Log("launch")->warn("launch_failed job={} step={} node={} reason=\"{}\"", e.job_id(),
                          e.has_step() ? std::to_string(e.step()) : "none",
                          state_.topology->NodeName(node), e.reason());
      if (e.has_step()) {
        engine.StepLaunchFailed(e.job_id(), e.step(), node, e.reason(), now, effects);
      } else {
        engine.LaunchFailed(e.job_id(), node, e.reason(), now, effects);
      }
      break;
    }
    case v1::AgentMessage::kJobReleased:
      engine.JobReleased(message.job_released().job_id(), node, now, effects);
      break;
    case v1::AgentMessage::kHealth:
      OnHealth(node, message.health(), effects);
      break;
    case v1::AgentMessage::kScriptFailed:
      OnScriptFailed(node, message.script_failed(), now, effects);
      break;
    case v1::AgentMessage::kImagePrepared:
      if (options_.on_image_prepared) options_.on_image_prepared(node, message.image_prepared());
      break;
    case v1::AgentMessage::kUsage:
      OnUsage(node, message.usage(), now);
      break;
    case v1::AgentMessage::kHeartbeat: {
      // The agent counts its silence from the last answer it had: past
      // NodeTimeout it stops the ranks the controller has given up on.
      v1::ControllerMessage ack;
      ack.mutable_heartbeat_ack();
      link->Send(std::move(ack));
      break;
    }
    default:
      break;
  }
  sink_.Execute(effects);
}

void AgentHub::OnUsage(NodeId node, const v1::UsageReport& report, Millis now) {
  const std::string& name = state_.topology->NodeName(node);
  if (absl::Status checked = CheckUsageReport(report); !checked.ok()) {
    Log("controller")
        ->warn("agent_report_refused node={} report=usage reason={:?}", name,
               std::string(checked.message()));
    ++refused_reports_;
    return;
  }
  // Believed only for jobs the engine runs there, at the attempt it runs.
  std::vector<UsageBook::Accepted> accepted;
  for (const v1::LaunchUsage& launch : report.launches()) {
    const Job* job = state_.engine.FindJob(launch.job_id());
    if (job == nullptr || job->state != JobState::kRunning ||
        !state_.engine.Placed(launch.job_id(), node) || job->run.attempt != launch.attempt()) {
      continue;
    }
    accepted.push_back({.launch = &launch});
  }
  // The node's clock may differ; the sample is as old as its arrival.
  state_.usage.Record(node, name, now, accepted, report);
}

absl::Status AgentHub::Refusal(const v1::Register& message, AgentLink* link) const {
  // Who the agent is was verified on its stream's thread (AgentGateway).
  const std::optional<NodeId> node = state_.topology->FindNode(message.node_name());
  if (!node) {
    return absl::FailedPreconditionError(
        fmt::format("node {} is not in the controller's cohort.conf; add a NodeName line for it",
                    message.node_name()));
  }
  if (message.protocol_version() != 1) {
    return absl::FailedPreconditionError(
        fmt::format("agent speaks protocol {}, the controller 1; run matching versions",
                    message.protocol_version()));
  }
  // A node's agent that reconnects finds its old stream gone, or silent
  // for missed heartbeats (a dead peer). A live one means a second agent
  // claims the node: it must not take the node's jobs from the first.
  const auto old = links_.find(*node);
  if (old != links_.end() && old->second != link) {
    const auto heard = last_heard_.find(*node);
    const Millis silent =
        ControllerState::Now() - (heard == last_heard_.end() ? Millis{0} : heard->second);
    if (silent < 3 * options_.heartbeat_interval) {
      Log("controller")
          ->warn(
              "agent_refused node={} peer={} connected_peer={} reason=\"node already connected\"",
              message.node_name(), link->PeerHost(), old->second->PeerHost());
      return absl::AlreadyExistsError(fmt::format(
          "node {} is already connected from {}; stop the other agent, or wait {} s after it "
          "stopped",
          message.node_name(), old->second->PeerHost(),
          3 * options_.heartbeat_interval.count() / 1000 + 1));
    }
  }
  return absl::OkStatus();
}

void AgentHub::Register(AgentLink* link, const v1::Register& message) {
  if (absl::Status refused = Refusal(message, link); !refused.ok()) {
    link->Close(std::move(refused));
    return;
  }
  const NodeId node = *state_.topology->FindNode(message.node_name());
  if (const auto old = links_.find(node); old != links_.end() && old->second != link) {
    link_nodes_.erase(old->second);
    old->second->Close(absl::AbortedError("replaced by a newer connection of the same node"));
  }
  links_[node] = link;
  link_nodes_[link] = node;
  last_heard_[node] = ControllerState::Now();
  // A new agent samples its launches afresh.
  state_.usage.ForgetNode(node);
  const NodeReport report = ReportOf(message);
  Effects effects;
  (void)state_.engine.NodeRegistered(node, report, ControllerState::Now(), effects);
  Log("controller")
      ->info(
          "agent_registered node={} peer={} cpus={} memory_mb={} gpus={} running_jobs={} "
          "finished_jobs={}",
          message.node_name(), link->PeerHost(), report.cpus, report.memory_mb, report.gpus,
          report.running.size(), report.finished.size());
  // A domain is "UUID/clique": 32 hex digits and a number. A longer one is
  // no NVML answer, and is neither kept nor logged whole.
  std::string domain = message.resources().nvlink_domain();
  if (domain.size() > kMaxNvlinkDomain) {
    Log("controller")
        ->warn("nvlink_domain_refused node={} size={} reason=\"longer than {} bytes\"",
               message.node_name(), domain.size(), kMaxNvlinkDomain);
    domain.clear();
  }
  for (const std::string& contradiction :
       state_.nvlink_domains.Report(*state_.topology, message.node_name(), domain)) {
    Log("controller")
        ->warn("nvlink_domain_mismatch node={} {:?}", message.node_name(), contradiction);
  }
  if (options_.on_nvlink_report) options_.on_nvlink_report();
  v1::ControllerMessage reply;
  reply.mutable_registered()->set_heartbeat_interval_ms(options_.heartbeat_interval.count());
  reply.mutable_registered()->set_node_timeout_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(state_.config.node_timeout).count());
  link->Send(std::move(reply));
  for (const Command& command : effects.commands) {
    // Reconciling sends a launch again only where the node never got it.
    if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
      Log("controller")
          ->warn("launch_resent node={} job={} reason=\"the node never got it\"",
                 message.node_name(), launch->job);
    }
  }
  sink_.Execute(effects);
}

void AgentHub::OnGone(AgentLink* link) {
  const auto it = link_nodes_.find(link);
  if (it == link_nodes_.end()) return;
  Log("controller")->info("agent_disconnected node={}", state_.topology->NodeName(it->second));
  Forget(link);
}

void AgentHub::Forget(AgentLink* link) {
  const auto it = link_nodes_.find(link);
  if (it == link_nodes_.end()) return;
  if (const auto current = links_.find(it->second);
      current != links_.end() && current->second == link) {
    links_.erase(current);
  }
  link_nodes_.erase(it);
}

void AgentHub::Send(const Command& command) {
  if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
    SendLaunch(*launch);
    return;
  }
  v1::ControllerMessage message;
  NodeId node = 0;
  if (const auto* signal = std::get_if<SignalCommand>(&command)) {
    v1::Signal& out = *message.mutable_signal();
    out.set_job_id(signal->job);
    out.set_signal(signal->signal);
    out.set_scope(signal->scope == SignalScope::kAll     ? v1::SIGNAL_ALL
                  : signal->scope == SignalScope::kBatch ? v1::SIGNAL_BATCH
                                                         : v1::SIGNAL_RANKS);
    if (signal->step) out.set_step(*signal->step);
    node = signal->node;
  } else {
    const auto& terminate = std::get<TerminateCommand>(command);
    v1::Terminate& out = *message.mutable_terminate();
    out.set_job_id(terminate.job);
    out.set_kill_wait_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(state_.config.kill_wait).count());
    if (terminate.step) out.set_step(*terminate.step);
    out.set_attempt(terminate.attempt);
    node = terminate.node;
  }
  SendToNode(node, std::move(message));
}

bool AgentHub::SendNow(NodeId node, v1::ControllerMessage message) {
  const auto it = links_.find(node);
  if (it == links_.end()) return false;
  it->second->Send(std::move(message));
  return true;
}

void AgentHub::SendToNode(NodeId node, v1::ControllerMessage message) {
  // A node without a stream cannot hear it; when its agent registers again
  // it reports its jobs and the engine stops what should not run.
  outbox_.Defer([this, node, message = std::move(message)]() mutable {
    if (const auto it = links_.find(node); it != links_.end()) it->second->Send(std::move(message));
  });
}

void AgentHub::FailLaunch(const LaunchCommand& launch) {
  // Registered but its stream dropped: the gang cannot start whole.
  Effects effects;
  const Millis now = ControllerState::Now();
  if (launch.step) {
    state_.engine.StepLaunchFailed(
        launch.job, *launch.step, launch.node,
        fmt::format("{}: its agent is not connected", state_.topology->NodeName(launch.node)), now,
        effects);
  } else {
    state_.engine.LaunchFailed(launch.job, launch.node, "its agent is not connected", now, effects);
    state_.engine.JobReleased(launch.job, launch.node, now, effects);
  }
  sink_.Execute(effects);
}

void AgentHub::SendLaunch(const LaunchCommand& launch) {
  const Job* job = state_.engine.FindJob(launch.job);
  if (job == nullptr) return;
  if (!links_.contains(launch.node)) {
    FailLaunch(launch);
    return;
  }
  if (launch.step) {
    // A step carries its own command and environment (StartStep).
    const auto spec = state_.step_specs.find({job->id, *launch.step});
    if (spec == state_.step_specs.end()) {
      Log("launch")->error("step_launch_unknown job={} step={}", job->id, *launch.step);
      FailLaunch(launch);
      return;
    }
    Launch(*job, launch, spec->second.spec);
    return;
  }
  if (const v1::JobSpec* env = KnownEnvironment(*job)) {
    Launch(*job, launch, *env);
    return;
  }
  std::vector<AwaitedLaunch>& waiting = awaiting_env_[job->id];
  waiting.push_back({launch, job->run.attempt});
  if (waiting.size() == 1) ReadEnvironment(*job);  // else one read is on its way
}

const v1::JobSpec* AgentHub::KnownEnvironment(const Job& job) {
  if (const auto it = state_.envs.find(job.id); it != state_.envs.end()) return &it->second;
  // An array's tasks share the environment kept with the array.
  if (job.array.job_id != 0 && job.array.job_id != job.id) {
    if (const auto it = state_.envs.find(job.array.job_id); it != state_.envs.end()) {
      return &state_.envs.emplace(job.id, it->second).first->second;
    }
  }
  return nullptr;
}

void AgentHub::ReadEnvironment(const Job& job) {
  // Submitted before a restart: the store has it (an array task's with
  // its array). Read on the reader's thread: a read of the database must
  // not hold up the state thread.
  const JobId id = job.id;
  const JobId array = job.array.job_id != id ? job.array.job_id : 0;
  reader_.Read(
      [id, array](Store& store) {
        std::optional<v1::JobSpec> env = StoredEnvironment(store, id);
        if (!env && array != 0) env = StoredEnvironment(store, array);
        return env ? *std::move(env) : v1::JobSpec();
      },
      [this, id](v1::JobSpec env) { EnvironmentRead(id, std::move(env)); });
}

void AgentHub::EnvironmentRead(JobId id, v1::JobSpec env) {
  auto waiting = awaiting_env_.extract(id);
  if (waiting.empty()) return;
  const Job* job = state_.engine.FindJob(id);
  // A finished job's environment is not kept: it never launches again.
  if (job == nullptr || IsFinished(job->state)) return;
  const v1::JobSpec& kept = state_.envs.insert_or_assign(id, std::move(env)).first->second;
  for (const AwaitedLaunch& awaited : waiting.mapped()) {
    // Looked up again each time: a failed launch changes the job.
    job = state_.engine.FindJob(id);
    if (job == nullptr || job->state != JobState::kRunning || job->run.attempt != awaited.attempt) {
      continue;  // cancelled, requeued or failed meanwhile: this launch is stale
    }
    if (!links_.contains(awaited.launch.node)) {
      FailLaunch(awaited.launch);
      continue;
    }
    Launch(*job, awaited.launch, kept);
  }
}

void AgentHub::Launch(const Job& job, const LaunchCommand& launch, const v1::JobSpec& env) {
  const topology::Topology& topology = *state_.topology;
  v1::ControllerMessage message;
  v1::Launch* l = message.mutable_launch();
  l->set_job_id(job.id);
  l->set_attempt(job.run.attempt);
  if (launch.step) {
    *l->mutable_spec() = env;  // the step's own spec, environment included
  } else {
    *l->mutable_spec() = state_.specs[job.id];
    *l->mutable_spec()->mutable_env() = env.env();
    l->mutable_spec()->set_name(job.request.name);
  }
  l->mutable_spec()->set_partition(job.request.partition);
  l->mutable_spec()->set_account(job.request.account);
  l->set_uid(job.request.uid);
  l->set_node_rank(launch.node_rank);
  std::vector<std::string> names;
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    if (Dropped(job, rank)) continue;  // no longer the job's
    names.push_back(topology.NodeName(job.run.placement.grants[rank].node));
  }
  l->set_nodelist(hostlist::CompressInOrder(names));
  l->set_num_nodes(static_cast<int>(names.size()));
  l->set_topology_addr(topology.AddressOf(launch.node));
  l->set_topology_addr_pattern(topology.AddressPatternOf(launch.node));
  if (const std::vector<int>& channels = job.run.imex_channels; !channels.empty()) {
    // One per job, or one per segment: node rank r's is at r × size ÷ nodes.
    const std::size_t at = static_cast<std::size_t>(launch.node_rank) * channels.size() /
                           job.run.placement.grants.size();
    l->set_imex_channel(channels[std::min(at, channels.size() - 1)]);
  }
  l->set_tasks_per_node(job.gang.tasks_per_node);
  NodeId master = job.run.placement.grants.front().node;
  int master_port = job.run.master_port;
  if (launch.step) {
    if (const JobStep* step = FindStep(job, *launch.step); step != nullptr) {
      master = SetStepLayout(job, *step, launch.node_rank, topology, l->mutable_step_layout());
      master_port = step->master_port;
    }
    l->set_step(*launch.step);
    if (const auto order = state_.step_specs.find({job.id, *launch.step});
        order != state_.step_specs.end()) {
      *l->mutable_step_io() = order->second.io;
    }
  } else {
    l->set_batch(IsBatch(job));
  }
  const auto master_link = links_.find(master);
  l->set_master_addr(master_link != links_.end() ? master_link->second->PeerHost()
                                                 : topology.NodeName(master));
  l->set_master_port(master_port);
  l->set_cpus(launch.grant.cpus);
  l->set_gpus(launch.grant.gpus);
  l->set_time_limit_s(job.time_limit == kUnlimited ? 0 : job.time_limit.count());
  l->set_job_start_time_ms(job.run.start_time.count());
  l->set_cluster_name(state_.config.cluster_name);
  l->set_partition(job.request.partition);
  SetArray(job, l);
  // Sent once the job's RUNNING state is durable.
  outbox_.Defer([this, launch, message = std::move(message)]() mutable {
    const auto link = links_.find(launch.node);
    if (link == links_.end()) {
      FailLaunch(launch);
      return;
    }
    link->second->Send(std::move(message));
  });
}

}  // namespace cohort::controller
