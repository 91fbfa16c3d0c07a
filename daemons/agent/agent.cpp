// SPDX-License-Identifier: Apache-2.0
#include "agent.h"

#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <signal.h>
#include <unistd.h>

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "agent_log.h"
#include "cohort/hostlist.h"

namespace cohort::agent {
namespace {

// gRPC's own reconnect backoff must not outlast ours: while a channel backs
// off, calls on it fail at once, so a controller back up would stay
// unreachable for up to gRPC's default of two minutes.
constexpr int kChannelMinBackoffMs = 100;
constexpr int kChannelMaxBackoffMs = 5000;
// How long a graceful stop may wait for gRPC to finish the streams.
constexpr std::chrono::seconds kStopDeadline{10};

std::string NodeNames(const std::vector<NodeSetup>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NodeSetup& node : nodes) names.push_back(node.name);
  return hostlist::Compress(names);
}

}  // namespace

Agent::Agent(boost::asio::io_context& loop, AgentSettings settings)
    : loop_(loop),
      settings_(std::move(settings)),
      environment_{settings_.controller_target, settings_.auth_key, settings_.cluster_name},
      work_(boost::asio::make_work_guard(loop)),
      stop_signals_(loop, SIGINT, SIGTERM),
      stop_deadline_(loop),
      reaper_(loop),
      launcher_(settings_.spool_dir) {}

Agent::~Agent() = default;

absl::Status Agent::Start() {
  if (absl::Status spool = launcher_.PrepareSpool(); !spool.ok()) return spool;
  for (const std::string& warning : settings_.warnings) AgentLog().warn("{}", warning);

  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kChannelMinBackoffMs);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kChannelMinBackoffMs);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kChannelMaxBackoffMs);
  channel_ = grpc::CreateCustomChannel(settings_.controller_target,
                                       grpc::InsecureChannelCredentials(), arguments);
  stub_ = v1::AgentGateway::NewStub(channel_);

  reaper_.Start();
  WaitForStopSignal();
  nodes_.reserve(settings_.nodes.size());
  for (const NodeSetup& setup : settings_.nodes) {
    nodes_.push_back(
        std::make_unique<AgentNode>(loop_, *stub_, environment_, setup, reaper_, launcher_));
  }
  AgentLog().info("agent_started nodes={} count={} mode={} controller={} spool={} pid={}",
                  NodeNames(settings_.nodes), settings_.nodes.size(),
                  settings_.mode == NodeMode::kEmulated ? "emulated" : "real",
                  settings_.controller_target, settings_.spool_dir, ::getpid());
  for (const std::unique_ptr<AgentNode>& node : nodes_) node->Start();
  return absl::OkStatus();
}

void Agent::WaitForStopSignal() {
  stop_signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (stopping_) {
      // A second signal: the operator does not want to wait for gRPC.
      AgentLog().warn("agent_stop_forced signal={}", SignalName(signal));
      std::_Exit(EXIT_FAILURE);
    }
    AgentLog().info("agent_signal signal={}", SignalName(signal));
    Stop();
    WaitForStopSignal();
  });
}

void Agent::Stop() {
  if (stopping_) return;
  stopping_ = true;
  std::size_t ranks = 0;
  for (const std::unique_ptr<AgentNode>& node : nodes_) ranks += node->LiveRanks();
  AgentLog().info("agent_stopping ranks_left_running={}", ranks);
  stop_deadline_.expires_after(kStopDeadline);
  stop_deadline_.async_wait([](const boost::system::error_code& error) {
    if (error) return;
    // gRPC still holds the streams, so nothing can be torn down safely; the
    // ranks are not ours to kill either way.
    AgentLog().error("agent_stop_timeout after_s={}", kStopDeadline.count());
    std::_Exit(EXIT_FAILURE);
  });
  nodes_running_ = nodes_.size();
  if (nodes_.empty()) {
    nodes_running_ = 1;
    OnNodeStopped();
    return;
  }
  for (const std::unique_ptr<AgentNode>& node : nodes_) {
    node->Stop([this] { OnNodeStopped(); });
  }
}

void Agent::OnNodeStopped() {
  if (--nodes_running_ > 0) return;
  // Nothing is left that needs the loop: let run() return.
  reaper_.Stop();
  boost::system::error_code ignored;
  stop_signals_.cancel(ignored);
  stop_deadline_.cancel();
  work_.reset();
  AgentLog().info("agent_stopped");
}

absl::Status RunAgent(AgentSettings settings) {
  boost::asio::io_context loop(1);
  Agent agent(loop, std::move(settings));
  if (absl::Status started = agent.Start(); !started.ok()) return started;
  try {
    loop.run();
  } catch (const std::exception& e) {
    // A bug of ours; gRPC still holds the streams, so leave without cleanup.
    AgentLog().critical("agent_crashed error={:?}", e.what());
    std::_Exit(EXIT_FAILURE);
  }
  return absl::OkStatus();
}

}  // namespace cohort::agent
