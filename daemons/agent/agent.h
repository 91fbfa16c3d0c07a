// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <grpcpp/channel.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "agent_node.h"
#include "agent_options.h"
#include "child_reaper.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "process_launcher.h"

/// The cohort-agent process.
namespace cohort::agent {

/// The agent: one gRPC channel to the controller, one AgentNode (and stream)
/// per node it speaks for, one reaper for all their ranks. Everything runs
/// on the one thread that runs `loop`; gRPC's threads only post to it.
/// SIGINT and SIGTERM stop it gracefully: the streams close, the ranks keep
/// running (a restarted agent reports them in Register).
class Agent {
 public:
  Agent(boost::asio::io_context& loop, AgentSettings settings);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  ~Agent();

  /// Prepares the spool, connects every node and starts reaping. Call on the
  /// loop's thread before running it. Returns the spool's error status.
  [[nodiscard]] absl::Status Start();

  /// Closes every stream; once gRPC is done with them the loop runs out of
  /// work and returns. Ranks are left running. Loop thread; idempotent.
  void Stop();

 private:
  void WaitForStopSignal();
  void OnNodeStopped();

  boost::asio::io_context& loop_;
  AgentSettings settings_;
  NodeEnvironment environment_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::signal_set stop_signals_;
  boost::asio::steady_timer stop_deadline_;
  ChildReaper reaper_;
  ProcessLauncher launcher_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentGateway::Stub> stub_;
  std::vector<std::unique_ptr<AgentNode>> nodes_;
  std::size_t nodes_running_ = 0;
  bool stopping_ = false;
};

/// Runs the agent on this thread until SIGINT or SIGTERM. Returns the
/// startup error, if any, else OK after a graceful stop.
[[nodiscard]] absl::Status RunAgent(AgentSettings settings);

}  // namespace cohort::agent
