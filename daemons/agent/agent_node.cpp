// SPDX-License-Identifier: Apache-2.0
#include "agent_node.h"

#include <fmt/format.h>

#include <utility>

#include "agent_log.h"
#include "agent_session.h"
#include "fake_runner.h"
#include "munge_credential.h"

namespace cohort::agent {
namespace {

constexpr std::uint32_t kProtocolVersion = 1;

}  // namespace

NodeParts AgentNodeParts(boost::asio::io_context& loop, ControllerLinks& links,
                         const NodeEnvironment& environment, const NodeSetup& setup,
                         ChildReaper& reaper, const StepLauncher& launcher,
                         ImagePrefetcher& images) {
  NodeParts parts;
  parts.link = [&loop, &links, name = setup.name](NodeLink::Hooks hooks) {
    return std::make_unique<AgentSession>(loop, links, name, std::move(hooks));
  };
  if (environment.fake_exec) {
    parts.runner = [&loop](const NodeSetup& node, SendToController send) {
      return std::make_unique<FakeRunner>(loop, node, std::move(send));
    };
    return parts;  // no process runs, so no health check either
  }
  parts.runner = [&loop, &environment, &reaper, &launcher, &images](const NodeSetup& node,
                                                                    SendToController send) {
    return std::make_unique<StepdRunner>(loop, environment.stepd, node, reaper, launcher, images,
                                         std::move(send));
  };
  if (!environment.health_program.empty() && environment.health_interval.count() > 0) {
    parts.health = [&loop, &environment, &reaper, &launcher,
                    name = setup.name](HealthCheck::Verdict on_verdict) {
      return std::make_unique<HealthCheck>(
          loop, reaper, environment.health_program, environment.health_interval, name,
          launcher.NodeFolder(name) + "/health.out", std::move(on_verdict));
    };
  }
  return parts;
}

AgentNode::AgentNode(const NodeEnvironment& environment, NodeSetup setup, const NodeParts& parts)
    : environment_(environment),
      setup_(std::move(setup)),
      link_(parts.link(NodeLink::Hooks{
          .make_register = [this] { return MakeRegister(); },
          .on_message = [this](const v1::ControllerMessage& m) { OnMessage(m); },
          .on_fence = [this] { runner_->Fence(); },
      })),
      runner_(parts.runner(setup_, [this](v1::AgentMessage message) { Send(std::move(message)); })),
      make_health_(parts.health) {}

void AgentNode::Start() {
  // What an earlier agent left is queued first, and sent once the
  // controller has answered Register.
  runner_->Start();
  link_->Start();
  if (make_health_) {
    health_ = make_health_([this](bool healthy, const std::string& reason) {
      v1::AgentMessage message;
      message.mutable_health()->set_healthy(healthy);
      message.mutable_health()->set_reason(reason);
      Send(std::move(message));
    });
  }
  if (health_) health_->Start();
}

void AgentNode::Stop(std::function<void()> on_stopped) {
  if (health_) health_->Stop();
  runner_->Stop();
  link_->Stop(std::move(on_stopped));
}

NodeMetrics AgentNode::Metrics() const {
  NodeMetrics out;
  out.node = setup_.name;
  out.gpus = setup_.resources.gpus;
  out.live_ranks = runner_->LiveRanks();
  runner_->AddMetrics(out);
  return out;
}

v1::Register AgentNode::MakeRegister() const {
  v1::Register message;
  message.set_node_name(setup_.name);
  message.set_protocol_version(kProtocolVersion);
  if (environment_.auth_type == config::AuthType::kNone) {
    message.set_auth_key(environment_.auth_key);
  } else {
    // Fresh for each registration: munged refuses a credential decoded twice.
    absl::StatusOr<std::string> credential = shell::EncodeMungeCredential(
        environment_.munge_socket,
        fmt::format("{}{}", shell::kMungeAgentPayloadPrefix, setup_.name));
    if (credential.ok()) {
      message.set_credential(*std::move(credential));
    } else {
      AgentLog().warn("munge_failed node={} reason={:?}", setup_.name,
                      std::string(credential.status().message()));
    }
  }
  v1::NodeResources* resources = message.mutable_resources();
  resources->set_cpus(setup_.resources.cpus);
  resources->set_memory_mb(setup_.resources.memory_mb);
  resources->set_gpus(setup_.resources.gpus);
  for (const std::uint64_t group : setup_.resources.gpu_groups) resources->add_gpu_groups(group);
  resources->set_nvlink_domain(setup_.resources.nvlink_domain);
  runner_->AddTo(message);
  return message;
}

void AgentNode::OnMessage(const v1::ControllerMessage& message) {
  switch (message.message_case()) {
    case v1::ControllerMessage::kLaunch:
      runner_->Launch(message.launch());
      break;
    case v1::ControllerMessage::kSignal:
      runner_->Signal(message.signal());
      break;
    case v1::ControllerMessage::kPrepareImage:
      runner_->PrepareImage(message.prepare_image());
      break;
    case v1::ControllerMessage::kTerminate:
      runner_->Terminate(message.terminate());
      break;
    case v1::ControllerMessage::kRegistered:  // the link handles these
    case v1::ControllerMessage::kHeartbeatAck:
    case v1::ControllerMessage::MESSAGE_NOT_SET:
      AgentLog().debug("controller_message_ignored node={} case={}", setup_.name,
                       static_cast<int>(message.message_case()));
      break;
  }
}

}  // namespace cohort::agent
