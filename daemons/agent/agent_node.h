// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "agent_metrics.h"
#include "agent_options.h"
#include "child_reaper.h"
#include "cohort/config/cluster_config.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "controller_links.h"
#include "health_check.h"
#include "image_prefetcher.h"
#include "launch_file.h"
#include "launch_runner.h"
#include "step_launcher.h"
#include "stepd_runner.h"

/// One node the agent speaks for, real or emulated.
namespace cohort::agent {

/// What every node of one agent shares.
struct NodeEnvironment {
  /// How the node proves itself when it registers: a fresh MUNGE credential
  /// (kMunge) or the cluster key (kNone).
  config::AuthType auth_type = config::AuthType::kMunge;
  std::string munge_socket;  ///< AuthInfo=socket=; empty: libmunge's default
  std::string auth_key;      ///< AuthType=none
  /// Run no process: launches are played by a FakeRunner (--fake-exec).
  bool fake_exec = false;
  /// HealthCheckProgram and HealthCheckInterval (health_check.h); empty or
  /// 0: no check.
  std::string health_program;
  std::chrono::seconds health_interval{0};
  /// How a StepdRunner runs launches (not under fake execution).
  StepdSettings stepd;
};

/// What a node is made of: its link to the controller, what runs its
/// launches, and its health check. Each is made by the node, once it
/// exists: the link with the node's hooks; the runner (for the node's own
/// setup) and the check with a way to send on the link.
struct NodeParts {
  std::function<std::unique_ptr<NodeLink>(NodeLink::Hooks)> link;
  std::function<std::unique_ptr<LaunchRunner>(const NodeSetup&, SendToController)> runner;
  /// Null, or a function that makes none: no HealthCheckProgram.
  std::function<std::unique_ptr<HealthCheck>(HealthCheck::Verdict)> health;
};

/// The parts of a node as cohort-agent runs it: an AgentSession over
/// `links`; a StepdRunner (pulling images ahead with `images`), or a
/// FakeRunner under fake execution; and the cluster's health check where it
/// has one (never under fake execution). The loop, links, environment,
/// reaper, launcher and images must outlive the node.
[[nodiscard]] NodeParts AgentNodeParts(boost::asio::io_context& loop, ControllerLinks& links,
                                       const NodeEnvironment& environment, const NodeSetup& setup,
                                       ChildReaper& reaper, const StepLauncher& launcher,
                                       ImagePrefetcher& images);

/// One node the controller knows: registers it (name, resources, the
/// launches its runner holds, a MUNGE credential or the cluster key) over
/// its link, passes the controller's Launch, Signal and Terminate to its
/// runner, and reports its health check's verdicts. Lives on, and is used
/// only from, the agent's loop thread.
class AgentNode {
 public:
  AgentNode(const NodeEnvironment& environment, NodeSetup setup, const NodeParts& parts);
  AgentNode(const AgentNode&) = delete;
  AgentNode& operator=(const AgentNode&) = delete;

  /// Lets the runner take on what an earlier agent left, then connects to
  /// the controller and starts the health check.
  void Start();
  /// Closes the stream; ranks keep running. Calls `on_stopped` on the loop.
  void Stop(std::function<void()> on_stopped);

  /// A stepd says its launch has news.
  void OnStepNotice(step::LaunchId id) { runner_->OnStepNotice(id); }
  /// Catches up on the runner's launches and forgets old ones.
  void Poll() { runner_->Poll(); }

  [[nodiscard]] const std::string& Name() const { return setup_.name; }
  [[nodiscard]] std::size_t LiveRanks() const { return runner_->LiveRanks(); }
  /// This node's metrics now (agent_metrics.h).
  [[nodiscard]] NodeMetrics Metrics() const;

 private:
  [[nodiscard]] v1::Register MakeRegister() const;
  void OnMessage(const v1::ControllerMessage& message);
  void Send(v1::AgentMessage message) { link_->Send(std::move(message)); }

  const NodeEnvironment& environment_;
  const NodeSetup setup_;
  std::unique_ptr<NodeLink> link_;
  std::unique_ptr<LaunchRunner> runner_;  ///< made after the link, which it sends on
  std::function<std::unique_ptr<HealthCheck>(HealthCheck::Verdict)> make_health_;
  std::unique_ptr<HealthCheck> health_;  ///< once started, when the cluster has a check
};

}  // namespace cohort::agent
