// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <grpcpp/channel.h>

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/datagram_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent_node.h"
#include "agent_options.h"
#include "child_reaper.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "gpu_usage.h"
#include "http_server.h"
#include "image_prefetcher.h"
#include "step_launcher.h"

/// The cohort-agent process.
namespace cohort::agent {

/// The agent: one gRPC channel to the controller, one AgentNode (and stream)
/// per node it speaks for, one reaper for the cohort-stepds it starts, one
/// datagram socket (SPOOL/agent.sock) on which the stepds say a launch has
/// news, and a one-second poll of every launch. Everything runs on the one
/// thread that runs `loop`; gRPC's threads only post to it. SIGINT and
/// SIGTERM stop it gracefully: the streams close, the stepds and their ranks
/// keep running, and an agent started again on the same spool adopts them.
class Agent {
 public:
  Agent(boost::asio::io_context& loop, AgentSettings settings);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  ~Agent();

  /// Prepares and locks the spool, binds the stepds' socket, adopts the
  /// launches an earlier agent left, connects every node and starts reaping.
  /// Call on the loop's thread before running it. Returns the spool's error
  /// status.
  [[nodiscard]] absl::Status Start();

  /// Closes every stream; once gRPC is done with them the loop runs out of
  /// work and returns. Ranks are left running. Loop thread; idempotent.
  void Stop();

 private:
  /// Serves /metrics on --http-port, when given.
  [[nodiscard]] absl::Status ServeMetrics();
  void WaitForStopSignal();
  void OnNodeStopped();
  void ListenForStepds();
  void ReceiveNotice();
  void OnNotice(std::string_view folder);
  void SchedulePoll();

  boost::asio::io_context& loop_;
  AgentSettings settings_;
  /// The nodes' GPUs as NVML reads them, for the samples of what launches
  /// use; null without NVML (or without samples).
  std::unique_ptr<GpuUsageReader> gpu_usage_;
  NodeEnvironment environment_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::signal_set stop_signals_;
  boost::asio::steady_timer stop_deadline_;
  ChildReaper reaper_;
  StepLauncher launcher_;
  ImagePrefetcher images_;  ///< pulls ahead for every node (they share a cache)
  boost::asio::local::datagram_protocol::socket notices_;
  std::array<char, 4096> notice_buffer_{};
  boost::asio::steady_timer poll_timer_;
  std::unique_ptr<ControllerLinks> links_;
  std::vector<std::unique_ptr<AgentNode>> nodes_;
  std::map<std::string, AgentNode*, std::less<>> nodes_by_name_;
  std::size_t nodes_running_ = 0;
  bool stopping_ = false;
  std::unique_ptr<http::HttpServer> http_;  ///< --http-port: /metrics
};

/// Runs the agent on this thread until SIGINT or SIGTERM. Returns the
/// startup error, if any, else OK after a graceful stop.
[[nodiscard]] absl::Status RunAgent(AgentSettings settings);

}  // namespace cohort::agent
