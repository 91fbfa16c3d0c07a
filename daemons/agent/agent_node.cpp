// SPDX-License-Identifier: Apache-2.0
#include "agent_node.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "agent_log.h"
#include "cohort/hostlist.h"

namespace cohort::agent {
namespace {

constexpr std::uint32_t kProtocolVersion = 1;
// A Terminate's grace period is capped: a nonsense value must not keep a
// gang's resources held forever.
constexpr std::int64_t kMaxKillWaitMs = 24LL * 3600 * 1000;

// Ranks as a hostlist-like range text for logs: 0-3, or 4,6.
std::string RankText(const std::vector<StartedRank>& ranks) {
  std::vector<std::string> names;
  names.reserve(ranks.size());
  for (const StartedRank& rank : ranks) names.push_back(fmt::format("r{}", rank.rank));
  std::string text = hostlist::Compress(names);
  // r[0-3] reads better as 0-3.
  if (text.starts_with("r[") && text.ends_with(']')) return text.substr(2, text.size() - 3);
  return text.starts_with('r') ? text.substr(1) : text;
}

v1::AgentMessage JobReleasedMessage(std::int64_t job_id) {
  v1::AgentMessage message;
  message.mutable_job_released()->set_job_id(job_id);
  return message;
}

}  // namespace

AgentNode::AgentNode(boost::asio::io_context& loop, v1::AgentGateway::Stub& stub,
                     const NodeEnvironment& environment, NodeSetup setup, ChildReaper& reaper,
                     const ProcessLauncher& launcher)
    : loop_(loop),
      environment_(environment),
      setup_(std::move(setup)),
      reaper_(reaper),
      launcher_(launcher),
      session_(loop, stub, setup_.name, environment.controller,
               AgentSession::Hooks{
                   .make_register = [this] { return MakeRegister(); },
                   .on_message = [this](const v1::ControllerMessage& m) { OnMessage(m); },
               }) {}

void AgentNode::Start() { session_.Start(); }

void AgentNode::Stop(std::function<void()> on_stopped) {
  // The agent leaves the ranks running, and a pending SIGKILL would keep its
  // loop alive.
  for (auto& [id, job] : jobs_) {
    if (job.kill_timer) job.kill_timer->cancel();
  }
  session_.Stop(std::move(on_stopped));
}

std::size_t AgentNode::LiveRanks() const {
  std::size_t count = 0;
  for (const auto& [id, job] : jobs_) count += job.live.size();
  return count;
}

v1::Register AgentNode::MakeRegister() const {
  v1::Register message;
  message.set_node_name(setup_.name);
  message.set_protocol_version(kProtocolVersion);
  message.set_auth_key(environment_.auth_key);
  v1::NodeResources* resources = message.mutable_resources();
  resources->set_cpus(setup_.resources.cpus);
  resources->set_memory_mb(setup_.resources.memory_mb);
  resources->set_gpus(setup_.resources.gpus);
  for (const auto& [id, job] : jobs_) {
    if (job.live.empty()) continue;
    v1::RunningJob* running = message.add_running();
    running->set_job_id(id);
    for (const auto& [rank, pid] : job.live) running->add_ranks(rank);
  }
  return message;
}

void AgentNode::OnMessage(const v1::ControllerMessage& message) {
  switch (message.message_case()) {
    case v1::ControllerMessage::kLaunch:
      OnLaunch(message.launch());
      break;
    case v1::ControllerMessage::kSignal:
      OnSignal(message.signal());
      break;
    case v1::ControllerMessage::kTerminate:
      OnTerminate(message.terminate());
      break;
    case v1::ControllerMessage::kRegistered:  // the session handles it
    case v1::ControllerMessage::MESSAGE_NOT_SET:
      AgentLog().debug("controller_message_ignored node={} case={}", setup_.name,
                       static_cast<int>(message.message_case()));
      break;
  }
}

LaunchPlan AgentNode::MakePlan(const v1::Launch& launch) const {
  const v1::JobSpec& spec = launch.spec();
  LaunchPlan plan;
  launch::LaunchContext& context = plan.context;
  context.job_id = launch.job_id();
  context.job_name = spec.name();
  context.user_name = spec.user_name();
  context.partition = launch.partition().empty() ? spec.partition() : launch.partition();
  context.cluster_name =
      launch.cluster_name().empty() ? environment_.cluster_name : launch.cluster_name();
  context.nodelist = launch.nodelist().empty() ? setup_.name : launch.nodelist();
  // Zero is proto3's "unset"; a negative count is left for the launcher to refuse.
  context.num_nodes = launch.num_nodes() != 0 ? launch.num_nodes() : 1;
  context.node_rank = launch.node_rank();
  context.node_name = setup_.name;
  context.tasks_per_node = launch.tasks_per_node() != 0 ? launch.tasks_per_node()
                           : spec.tasks_per_node() != 0 ? spec.tasks_per_node()
                                                        : 1;
  context.cpus_per_task = spec.cpus_per_task() > 0 ? spec.cpus_per_task() : 1;
  for (int gpu = 0; gpu < 64; ++gpu) {
    if ((launch.gpus() >> gpu) & 1U) context.gpus.push_back(gpu);
  }
  context.master_addr = launch.master_addr();
  context.master_port = launch.master_port();
  context.submit_dir = spec.submit_dir();
  context.base_env.reserve(static_cast<std::size_t>(spec.env_size()));
  for (const v1::EnvVar& var : spec.env()) context.base_env.push_back({var.name(), var.value()});
  context.time_limit_s = launch.time_limit_s();

  plan.argv.assign(spec.argv().begin(), spec.argv().end());
  plan.script = spec.script();
  // sbatch's rule: without --chdir a job runs where it was submitted.
  plan.work_dir = spec.work_dir().empty() ? spec.submit_dir() : spec.work_dir();
  plan.output = spec.output();
  plan.error = spec.error();
  return plan;
}

void AgentNode::OnLaunch(const v1::Launch& launch) {
  const std::int64_t job_id = launch.job_id();
  if (jobs_.contains(job_id)) {
    LaunchLog().warn("launch_ignored job={} node={} attempt={} reason={:?}", job_id, setup_.name,
                     launch.attempt(), "the job already has ranks on this node");
    return;
  }

  SpawnResult result;
  if (::geteuid() == 0 && launch.uid() != 0) {
    // Running a user's program as root would hand them the node.
    result.status = absl::PermissionDeniedError(fmt::format(
        "{}: the agent runs as root and cannot yet start ranks as uid {}; run the agent as "
        "the job's user",
        setup_.name, launch.uid()));
  } else {
    result = launcher_.Spawn(MakePlan(launch));
  }

  if (!result.ranks.empty()) {
    Job& job = jobs_[job_id];
    job.phase = result.status.ok() ? JobPhase::kRunning : JobPhase::kLaunchFailed;
    job.process_group = result.process_group;
    job.script_path = result.script_path;
    job.serial = ++launches_;
    for (const StartedRank& rank : result.ranks) {
      job.live.emplace(rank.rank, rank.pid);
      reaper_.Watch(rank.pid, [this, job_id, rank = rank.rank](int wait_status) {
        OnRankExit(job_id, rank, wait_status);
      });
    }
  }

  if (!result.status.ok()) {
    const std::string reason(result.status.message());
    LaunchLog().warn("launch_failed job={} node={} killed_ranks={} reason={:?}", job_id,
                     setup_.name, result.ranks.size(), reason);
    v1::AgentMessage failed;
    failed.mutable_launch_failed()->set_job_id(job_id);
    failed.mutable_launch_failed()->set_reason(reason);
    session_.Send(std::move(failed));
    // With ranks to reap, JobReleased follows their exit.
    if (result.ranks.empty()) {
      ProcessLauncher::RemoveScript(result.script_path);
      SendJobReleased(job_id);
    }
    return;
  }

  v1::AgentMessage started;
  v1::RanksStarted* ranks = started.mutable_ranks_started();
  ranks->set_job_id(job_id);
  for (const StartedRank& rank : result.ranks) {
    ranks->add_ranks(rank.rank);
    ranks->add_pids(rank.pid);
  }
  session_.Send(std::move(started));
  LaunchLog().info("launch_started job={} node={} attempt={} ranks={} pgid={} program={:?}", job_id,
                   setup_.name, launch.attempt(), RankText(result.ranks), result.process_group,
                   launch.spec().argv().empty() ? std::string("(script)") : launch.spec().argv(0));
}

void AgentNode::OnRankExit(std::int64_t job_id, int rank, int wait_status) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  job.live.erase(rank);
  const int exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0;
  const int signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  if (job.phase == JobPhase::kRunning) {
    // The controller never heard of the ranks of a failed launch.
    v1::AgentMessage message;
    v1::RankExited* exited = message.mutable_rank_exited();
    exited->set_job_id(job_id);
    exited->set_rank(rank);
    exited->set_exit_code(exit_code);
    exited->set_signal(signal);
    session_.Send(std::move(message));
  }
  LaunchLog().log(exit_code == 0 && signal == 0 ? spdlog::level::debug : spdlog::level::info,
                  "rank_exited job={} node={} rank={} exit_code={} signal={} ranks_left={}", job_id,
                  setup_.name, rank, exit_code, signal == 0 ? "0" : SignalName(signal),
                  job.live.size());
  if (job.live.empty()) Release(job_id);
}

void AgentNode::Release(std::int64_t job_id) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  ProcessLauncher::RemoveScript(it->second.script_path);
  jobs_.erase(it);  // cancels a pending SIGKILL
  SendJobReleased(job_id);
}

void AgentNode::SendJobReleased(std::int64_t job_id) {
  LaunchLog().info("job_released job={} node={}", job_id, setup_.name);
  session_.Send(JobReleasedMessage(job_id));
}

void AgentNode::OnSignal(const v1::Signal& message) {
  const std::int64_t job_id = message.job_id();
  const int signal = message.signal();
  if (signal < 1 || signal >= NSIG) {
    LaunchLog().warn("signal_ignored job={} node={} signal={} reason={:?}", job_id, setup_.name,
                     signal, "not a signal number");
    return;
  }
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    LaunchLog().debug("signal_ignored job={} node={} signal={} reason={:?}", job_id, setup_.name,
                      SignalName(signal), "no ranks of the job on this node");
    return;
  }
  // A rank is unreaped while listed, so the group id cannot have been reused.
  if (::killpg(it->second.process_group, signal) != 0) {
    LaunchLog().debug("signal_failed job={} node={} signal={} error={:?}", job_id, setup_.name,
                      SignalName(signal), std::strerror(errno));
    return;
  }
  LaunchLog().info("job_signalled job={} node={} signal={} ranks={}", job_id, setup_.name,
                   SignalName(signal), it->second.live.size());
}

void AgentNode::OnTerminate(const v1::Terminate& message) {
  const std::int64_t job_id = message.job_id();
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    // Nothing runs here: the controller may free the node now.
    LaunchLog().debug("terminate_unknown job={} node={}", job_id, setup_.name);
    SendJobReleased(job_id);
    return;
  }
  Job& job = it->second;
  ::killpg(job.process_group, SIGTERM);
  const std::int64_t wait_ms = std::clamp<std::int64_t>(message.kill_wait_ms(), 0, kMaxKillWaitMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  if (!job.kill_timer) {
    job.kill_timer = std::make_unique<boost::asio::steady_timer>(loop_);
  } else if (job.kill_timer->expiry() <= deadline) {
    LaunchLog().info("job_terminating job={} node={} signal=TERM kill_in_ms=unchanged", job_id,
                     setup_.name);
    return;  // an earlier Terminate's SIGKILL comes sooner
  }
  job.kill_timer->expires_at(deadline);
  job.kill_timer->async_wait(
      [this, job_id, serial = job.serial](const boost::system::error_code& error) {
        if (error) return;
        const auto found = jobs_.find(job_id);
        if (found == jobs_.end() || found->second.serial != serial) return;
        ::killpg(found->second.process_group, SIGKILL);
        LaunchLog().info("job_killed job={} node={} signal=KILL ranks={}", job_id, setup_.name,
                         found->second.live.size());
      });
  LaunchLog().info("job_terminating job={} node={} signal=TERM ranks={} kill_in_ms={}", job_id,
                   setup_.name, job.live.size(), wait_ms);
}

}  // namespace cohort::agent
