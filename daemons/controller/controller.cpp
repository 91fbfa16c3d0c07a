// SPDX-License-Identifier: Apache-2.0
#include "controller.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cohort/fmt_absl.h"
#include "cohort/hostlist.h"

namespace cohort::controller {
namespace {

std::shared_ptr<spdlog::logger> Log(const std::string& name) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get(name);
  if (!logger) {
    logger = spdlog::default_logger()->clone(name);
    spdlog::register_logger(logger);
  }
  return logger;
}

absl::Status RequireTrusted(const Identity& who, std::string_view action) {
  if (who.trust != Identity::Trust::kAnonymous) return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "{} needs an identity: use the controller's local Unix socket, or present the cluster key "
      "(AuthKeyFile) over TCP",
      action));
}

}  // namespace

Controller::Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
                       alloc::NodePool pool, Options options)
    : config_(std::move(config)),
      topology_(std::move(topology)),
      engine_(config_, *topology_, std::move(pool)),
      options_(std::move(options)),
      tick_timer_(io_),
      logged_node_status_(static_cast<std::size_t>(topology_->NodeCount()), NodeStatus::kUnknown) {}

Millis Controller::Now() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
}

void Controller::Start() {
  tick_timer_.expires_after(options_.tick_interval);
  tick_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) Tick();
  });
}

void Controller::Tick() {
  Effects effects;
  engine_.Tick(Now(), effects);
  Execute(effects);
  // The engine forgets finished jobs after a while; so does the launch data.
  if (specs_.size() > engine_.Jobs().size()) {
    std::erase_if(specs_, [this](const auto& entry) { return engine_.FindJob(entry.first) == nullptr; });
  }
  Start();
}

void Controller::RequestPass() {
  // Coalesce: however many events arrive in one turn, one pass follows them.
  if (pass_posted_ || !engine_.ScheduleNeeded()) return;
  pass_posted_ = true;
  boost::asio::post(io_, [this] {
    pass_posted_ = false;
    const auto started = std::chrono::steady_clock::now();
    Effects effects;
    engine_.Schedule(Now(), effects);
    const auto took = std::chrono::steady_clock::now() - started;
    Log("sched")->debug("pass took_us={} launches={} changed_jobs={}",
                        std::chrono::duration_cast<std::chrono::microseconds>(took).count(),
                        std::count_if(effects.commands.begin(), effects.commands.end(),
                                      [](const Command& c) {
                                        return std::holds_alternative<LaunchCommand>(c);
                                      }),
                        effects.changed_jobs.size());
    Execute(effects);
  });
}

void Controller::Execute(Effects& effects) {
  for (const Command& command : effects.commands) {
    if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
      SendLaunch(*launch);
      continue;
    }
    v1::ControllerMessage message;
    NodeId node = 0;
    if (const auto* signal = std::get_if<SignalCommand>(&command)) {
      message.mutable_signal()->set_job_id(signal->job);
      message.mutable_signal()->set_signal(signal->signal);
      node = signal->node;
    } else {
      const auto& terminate = std::get<TerminateCommand>(command);
      message.mutable_terminate()->set_job_id(terminate.job);
      message.mutable_terminate()->set_kill_wait_ms(
          std::chrono::duration_cast<std::chrono::milliseconds>(config_.kill_wait).count());
      node = terminate.node;
    }
    // A node without a stream cannot hear it; when its agent registers again
    // it reports its jobs and the engine stops what should not run.
    if (const auto it = links_.find(node); it != links_.end()) it->second->Send(std::move(message));
  }
  for (const JobId id : effects.changed_jobs) Notify(id);
  for (const NodeId node : effects.changed_nodes) {
    const NodeView view = engine_.ViewNode(node);
    NodeStatus& logged = logged_node_status_[static_cast<std::size_t>(node)];
    if (view.status == logged) continue;
    logged = view.status;
    Log("controller")->info("node_state node={} state={}{}", topology_->NodeName(node),
                            NodeStatusName(view.status),
                            view.reason.empty() ? "" : fmt::format(" reason=\"{}\"", view.reason));
  }
  effects = {};
  RequestPass();
}

void Controller::SendLaunch(const LaunchCommand& launch) {
  const Job* job = engine_.FindJob(launch.job);
  const auto link = links_.find(launch.node);
  if (job == nullptr) return;
  if (link == links_.end()) {
    // Registered but its stream just dropped: the gang cannot start whole.
    Effects effects;
    engine_.LaunchFailed(launch.job, launch.node, "its agent is not connected", Now(), effects);
    engine_.JobReleased(launch.job, launch.node, Now(), effects);
    Execute(effects);
    return;
  }
  const topology::Topology& topology = *topology_;
  v1::ControllerMessage message;
  v1::Launch* l = message.mutable_launch();
  l->set_job_id(job->id);
  l->set_attempt(job->attempt);
  *l->mutable_spec() = specs_[job->id];
  l->mutable_spec()->set_name(job->request.name);
  l->mutable_spec()->set_partition(job->request.partition);
  l->mutable_spec()->set_account(job->request.account);
  l->set_uid(job->request.uid);
  l->set_node_rank(launch.node_rank);
  std::vector<std::string> names;
  for (const alloc::NodeGrant& g : job->placement.grants) names.push_back(topology.NodeName(g.node));
  l->set_nodelist(hostlist::Compress(names));
  l->set_num_nodes(static_cast<int>(job->placement.grants.size()));
  l->set_tasks_per_node(job->gang.tasks_per_node);
  const NodeId master = job->placement.grants.front().node;
  const auto master_link = links_.find(master);
  l->set_master_addr(master_link != links_.end() ? master_link->second->PeerHost()
                                                 : topology.NodeName(master));
  l->set_master_port(job->master_port);
  l->set_cpus(launch.grant.cpus);
  l->set_gpus(launch.grant.gpus);
  l->set_time_limit_s(job->time_limit == kUnlimited ? 0 : job->time_limit.count());
  l->set_cluster_name(config_.cluster_name);
  l->set_partition(job->request.partition);
  link->second->Send(std::move(message));
}

void Controller::Notify(JobId id) {
  const Job* job = engine_.FindJob(id);
  if (job == nullptr) return;
  auto [logged, fresh] = logged_state_.try_emplace(id, job->state);
  if (fresh || logged->second != job->state) {
    logged->second = job->state;
    std::vector<std::string> nodes;
    for (const alloc::NodeGrant& g : job->placement.grants) nodes.push_back(topology_->NodeName(g.node));
    Log("controller")->info("job_state job={} state={} nodes={} leaves={} reason=\"{}\"", id,
                            JobStateName(job->state), hostlist::Compress(nodes),
                            job->placement.leaves.size(), job->reason);
  }
  const bool finished = IsFinished(job->state);
  auto [first, last] = watchers_.equal_range(id);
  if (first != last) {
    v1::JobEvent event;
    JobToWire(*job, specs_[id], engine_, engine_.QueuePosition(id), event.mutable_job());
    for (auto it = first; it != last; ++it) {
      it->second->Push(event, finished ? JobWatcher::Last::kYes : JobWatcher::Last::kNo);
    }
  }
  if (finished) {
    watchers_.erase(id);
    logged_state_.erase(id);
  }
}

void Controller::SubmitJob(v1::SubmitJobRequest request, Identity who,
                           Reply<v1::SubmitJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)]() mutable {
    if (absl::Status trusted = RequireTrusted(who, "submitting"); !trusted.ok()) {
      reply(trusted);
      return;
    }
    absl::StatusOr<JobRequest> job = RequestFromSpec(request.spec(), who);
    if (!job.ok()) {
      reply(job.status());
      return;
    }
    v1::SubmitJobResponse response;
    if (request.test_only()) {
      absl::StatusOr<Engine::Preview> preview = engine_.TestSubmit(*job);
      if (!preview.ok()) {
        reply(preview.status());
        return;
      }
      response.set_would_run_on(preview->would_run_on);
      response.set_reason(preview->reason);
      reply(response);
      return;
    }
    Effects effects;
    absl::StatusOr<JobId> id = engine_.Submit(*std::move(job), Now(), effects);
    if (!id.ok()) {
      Log("rpc")->info("submit_refused user={} reason=\"{}\"", who.user_name, id.status());
      reply(id.status());
      return;
    }
    specs_[*id] = request.spec();
    response.set_job_id(*id);
    reply(response);
    Execute(effects);
  });
}

void Controller::CancelJob(v1::CancelJobRequest request, Identity who,
                           Reply<v1::CancelJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    if (absl::Status trusted = RequireTrusted(who, "cancelling"); !trusted.ok()) {
      reply(trusted);
      return;
    }
    Effects effects;
    absl::Status result = absl::OkStatus();
    for (const std::int64_t id : request.job_ids()) {
      absl::Status s = engine_.Cancel(id, request.signal(), Caller{who.uid}, Now(), effects);
      if (!s.ok() && result.ok()) result = s;
    }
    reply(result.ok() ? absl::StatusOr<v1::CancelJobResponse>(v1::CancelJobResponse{})
                      : absl::StatusOr<v1::CancelJobResponse>(result));
    Execute(effects);
  });
}

void Controller::GetJob(v1::GetJobRequest request, Identity /*who*/,
                        Reply<v1::GetJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)] {
    const Job* job = engine_.FindJob(request.job_id());
    if (job == nullptr) {
      reply(absl::NotFoundError(fmt::format(
          "job {} not found; finished jobs are kept for a few minutes (see cohort queue)",
          request.job_id())));
      return;
    }
    v1::GetJobResponse response;
    JobToWire(*job, specs_[job->id], engine_, engine_.QueuePosition(job->id),
              response.mutable_job());
    reply(response);
  });
}

void Controller::ListJobs(v1::ListJobsRequest request, Identity who,
                          Reply<v1::ListJobsResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    std::set<JobState> states;
    for (const int s : request.states()) {
      if (const std::optional<JobState> state = FromWire(static_cast<v1::JobState>(s))) {
        states.insert(*state);
      }
    }
    if (states.empty()) states = {JobState::kPending, JobState::kRunning, JobState::kCompleting};
    std::unordered_map<JobId, int> positions;
    int position = 0;
    for (const JobId id : engine_.PendingOrder()) positions[id] = ++position;
    v1::ListJobsResponse response;
    for (const auto& [id, job] : engine_.Jobs()) {
      if (!states.contains(job.state)) continue;
      if (!request.all_users() && request.user_name().empty() && job.request.uid != who.uid) continue;
      if (!request.user_name().empty() && job.request.user_name != request.user_name()) continue;
      const auto at = positions.find(id);
      JobToWire(job, specs_[id], engine_, at == positions.end() ? 0 : at->second,
                response.add_jobs());
    }
    reply(response);
  });
}

void Controller::ListNodes(v1::ListNodesRequest request, Reply<v1::ListNodesResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)] {
    const topology::Topology& topology = *topology_;
    std::vector<NodeId> nodes;
    if (request.nodes().empty()) {
      for (NodeId n = 0; n < topology.NodeCount(); ++n) nodes.push_back(n);
    } else {
      absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodes());
      if (!names.ok()) {
        reply(names.status());
        return;
      }
      for (const std::string& name : *names) {
        const std::optional<NodeId> id = topology.FindNode(name);
        if (!id) {
          reply(absl::NotFoundError(fmt::format("no node {}; see cohort nodes", name)));
          return;
        }
        nodes.push_back(*id);
      }
    }
    const alloc::NodePool& pool = engine_.Pool();
    v1::ListNodesResponse response;
    for (const NodeId n : nodes) {
      const NodeView view = engine_.ViewNode(n);
      const alloc::NodeCapacity& capacity = pool.Capacity(n);
      const alloc::NodeFree& free = pool.Free(n);
      v1::Node* out = response.add_nodes();
      out->set_name(topology.NodeName(n));
      out->set_state(ToWire(view.status));
      out->set_reason(view.reason);
      out->set_cpus(capacity.cpus);
      out->set_cpus_allocated(capacity.cpus - free.cpus);
      out->set_memory_mb(capacity.memory_mb);
      out->set_memory_allocated_mb(capacity.memory_mb - free.memory_mb);
      out->set_gpus(capacity.gpus);
      out->set_gpus_allocated(capacity.gpus - std::popcount(free.gpus));
      for (std::size_t i = 0; i < pool.FeatureNames().size(); ++i) {
        if ((capacity.features >> i) & 1U) out->add_features(pool.FeatureNames()[i]);
      }
      for (alloc::PartitionId p = 0; p < pool.PartitionCount(); ++p) {
        if (pool.GetPartition(p).contains[static_cast<std::size_t>(n)] != 0) {
          out->add_partitions(pool.GetPartition(p).name);
        }
      }
      for (const JobId id : view.jobs) out->add_jobs(id);
      const topology::SwitchId leaf = topology.LeafOf(n);
      if (leaf != topology::kNone) out->set_leaf(topology.GetSwitch(leaf).name);
      const topology::BlockId block = topology.BlockOf(n);
      if (block != topology::kNone) out->set_block(topology.Blocks()[block].name);
    }
    reply(response);
  });
}

void Controller::UpdateNode(v1::UpdateNodeRequest request, Identity who,
                            Reply<v1::UpdateNodeResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    if (absl::Status trusted = RequireTrusted(who, "changing nodes"); !trusted.ok()) {
      reply(trusted);
      return;
    }
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodes());
    if (!names.ok()) {
      reply(names.status());
      return;
    }
    std::vector<NodeId> nodes;
    for (const std::string& name : *names) {
      const std::optional<NodeId> id = topology_->FindNode(name);
      if (!id) {
        reply(absl::NotFoundError(fmt::format("no node {}; see cohort nodes", name)));
        return;
      }
      nodes.push_back(*id);
    }
    Effects effects;
    for (const NodeId n : nodes) {
      absl::Status s;
      if (request.action() == v1::NODE_DRAIN) {
        s = engine_.Drain(n, request.reason(), Caller{who.uid}, effects);
      } else if (request.action() == v1::NODE_RESUME) {
        s = engine_.Resume(n, Caller{who.uid}, effects);
      } else {
        s = absl::InvalidArgumentError("action: say drain or resume");
      }
      if (!s.ok()) {
        reply(s);
        Execute(effects);
        return;
      }
      Log("controller")->info("node_update node={} action={} by_uid={}", topology_->NodeName(n),
                              request.action() == v1::NODE_DRAIN ? "drain" : "resume", who.uid);
    }
    reply(v1::UpdateNodeResponse{});
    Execute(effects);
  });
}

void Controller::GetTopology(Reply<v1::GetTopologyResponse> reply) {
  boost::asio::post(io_, [this, reply = std::move(reply)] {
    const topology::Topology& topology = *topology_;
    // Per node: 0 idle, 1 running jobs, 2 unavailable.
    std::vector<int> kind(static_cast<std::size_t>(topology.NodeCount()));
    for (NodeId n = 0; n < topology.NodeCount(); ++n) {
      switch (engine_.ViewNode(n).status) {
        case NodeStatus::kIdle: kind[static_cast<std::size_t>(n)] = 0; break;
        case NodeStatus::kMixed:
        case NodeStatus::kAllocated: kind[static_cast<std::size_t>(n)] = 1; break;
        default: kind[static_cast<std::size_t>(n)] = 2; break;
      }
    }
    v1::GetTopologyResponse response;
    for (const topology::SwitchId s : topology.SwitchesByLevel()) {
      const topology::Switch& sw = topology.GetSwitch(s);
      v1::Switch* out = response.add_switches();
      out->set_name(sw.name);
      out->set_level(sw.level);
      if (sw.parent != topology::kNone) out->set_parent(topology.GetSwitch(sw.parent).name);
      for (const topology::SwitchId c : sw.children) out->add_children(topology.GetSwitch(c).name);
      std::vector<std::string> names;
      for (const NodeId n : sw.nodes) names.push_back(topology.NodeName(n));
      out->set_nodes(hostlist::Compress(names));
      out->set_node_count(sw.node_count);
      int counts[3] = {0, 0, 0};
      for (const topology::SwitchId leaf : sw.leaves) {
        for (const NodeId n : topology.GetSwitch(leaf).nodes) ++counts[kind[static_cast<std::size_t>(n)]];
      }
      out->set_idle(counts[0]);
      out->set_allocated(counts[1]);
      out->set_unavailable(counts[2]);
    }
    for (const topology::SwitchId r : topology.Roots()) response.add_roots(topology.GetSwitch(r).name);
    reply(response);
  });
}

void Controller::Watch(std::int64_t id, JobWatcher* watcher, Reply<bool> reply) {
  boost::asio::post(io_, [this, id, watcher, reply = std::move(reply)] {
    const Job* job = engine_.FindJob(id);
    if (job == nullptr) {
      reply(absl::NotFoundError(fmt::format("job {} not found; see cohort queue", id)));
      return;
    }
    reply(true);
    v1::JobEvent event;
    JobToWire(*job, specs_[id], engine_, engine_.QueuePosition(id), event.mutable_job());
    const bool finished = IsFinished(job->state);
    watcher->Push(std::move(event), finished ? JobWatcher::Last::kYes : JobWatcher::Last::kNo);
    if (!finished) watchers_.emplace(id, watcher);
  });
}

void Controller::Unwatch(JobWatcher* watcher, std::function<void()> after) {
  boost::asio::post(io_, [this, watcher, after = std::move(after)] {
    std::erase_if(watchers_, [watcher](const auto& entry) { return entry.second == watcher; });
    after();
  });
}

void Controller::OnAgentMessage(AgentLink* link, v1::AgentMessage message) {
  boost::asio::post(io_, [this, link, message = std::move(message)] {
    if (message.has_register_()) {
      Register(link, message.register_());
      return;
    }
    const auto known = link_nodes_.find(link);
    if (known == link_nodes_.end()) {
      link->Close(absl::FailedPreconditionError("send Register first"));
      return;
    }
    const NodeId node = known->second;
    const Millis now = Now();
    engine_.NodeHeartbeat(node, now);
    Effects effects;
    switch (message.message_case()) {
      case v1::AgentMessage::kRanksStarted:
        Log("launch")->debug("ranks_started job={} node={} ranks={}", message.ranks_started().job_id(),
                             topology_->NodeName(node), message.ranks_started().ranks_size());
        break;
      case v1::AgentMessage::kRankExited: {
        const v1::RankExited& e = message.rank_exited();
        engine_.RankExited(e.job_id(), node, e.exit_code(), e.signal(), now, effects);
        break;
      }
      case v1::AgentMessage::kLaunchFailed: {
        const v1::LaunchFailed& e = message.launch_failed();
        Log("launch")->warn("launch_failed job={} node={} reason=\"{}\"", e.job_id(),
                            topology_->NodeName(node), e.reason());
        engine_.LaunchFailed(e.job_id(), node, e.reason(), now, effects);
        break;
      }
      case v1::AgentMessage::kJobReleased:
        engine_.JobReleased(message.job_released().job_id(), node, now, effects);
        break;
      default: break;
    }
    Execute(effects);
  });
}

void Controller::Register(AgentLink* link, const v1::Register& message) {
  const std::optional<NodeId> node = topology_->FindNode(message.node_name());
  if (message.auth_key() != options_.auth_key) {
    Log("controller")->warn("agent_refused node={} peer={} reason=\"wrong cluster key\"",
                            message.node_name(), link->PeerHost());
    link->Close(absl::PermissionDeniedError(
        "the agent's key does not match the cluster's AuthKeyFile; copy the controller's key file "
        "to this node"));
    return;
  }
  if (!node) {
    link->Close(absl::FailedPreconditionError(fmt::format(
        "node {} is not in the controller's cohort.conf; add a NodeName line for it",
        message.node_name())));
    return;
  }
  if (message.protocol_version() != 1) {
    link->Close(absl::FailedPreconditionError(fmt::format(
        "agent speaks protocol {}, the controller 1; run matching versions",
        message.protocol_version())));
    return;
  }
  if (const auto old = links_.find(*node); old != links_.end() && old->second != link) {
    link_nodes_.erase(old->second);
    old->second->Close(absl::AbortedError("replaced by a newer connection of the same node"));
  }
  links_[*node] = link;
  link_nodes_[link] = *node;
  NodeReport report;
  report.cpus = message.resources().cpus();
  report.memory_mb = message.resources().memory_mb();
  report.gpus = message.resources().gpus();
  report.gpu_groups.assign(message.resources().gpu_groups().begin(),
                           message.resources().gpu_groups().end());
  for (const v1::RunningJob& running : message.running()) report.running_jobs.push_back(running.job_id());
  Effects effects;
  (void)engine_.NodeRegistered(*node, report, Now(), effects);
  Log("controller")->info("agent_registered node={} peer={} cpus={} memory_mb={} gpus={} running_jobs={}",
                          message.node_name(), link->PeerHost(), report.cpus, report.memory_mb,
                          report.gpus, report.running_jobs.size());
  v1::ControllerMessage reply;
  reply.mutable_registered()->set_heartbeat_interval_ms(options_.heartbeat_interval.count());
  link->Send(std::move(reply));
  Execute(effects);
}

void Controller::OnAgentGone(AgentLink* link, std::function<void()> after) {
  boost::asio::post(io_, [this, link, after = std::move(after)] {
    if (const auto it = link_nodes_.find(link); it != link_nodes_.end()) {
      // The node stays up until NodeTimeout: an agent that reconnects in
      // time loses nothing.
      Log("controller")->info("agent_disconnected node={}", topology_->NodeName(it->second));
      if (links_[it->second] == link) links_.erase(it->second);
      link_nodes_.erase(it);
    }
    after();
  });
}

}  // namespace cohort::controller
