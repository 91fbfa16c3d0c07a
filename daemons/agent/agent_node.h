// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent_options.h"
#include "agent_session.h"
#include "child_reaper.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "process_launcher.h"

/// One node the agent speaks for, real or emulated.
namespace cohort::agent {

/// What every node of one agent shares.
struct NodeEnvironment {
  std::string controller;  ///< the gRPC target, for logs
  std::string auth_key;
  std::string cluster_name;  ///< used when a Launch names none
};

/// One node: its stream to the controller (an AgentSession) and the jobs
/// running on it. Turns Launch, Signal and Terminate into processes and
/// signals, and rank exits into RankExited and JobReleased. Validates what
/// the controller sends: a bad message is logged and answered, never fatal.
/// Lives on, and is used only from, the agent's loop thread; the reaper,
/// launcher and stub must outlive it.
class AgentNode {
 public:
  AgentNode(boost::asio::io_context& loop, v1::AgentGateway::Stub& stub,
            const NodeEnvironment& environment, NodeSetup setup, ChildReaper& reaper,
            const ProcessLauncher& launcher);
  AgentNode(const AgentNode&) = delete;
  AgentNode& operator=(const AgentNode&) = delete;

  /// Connects to the controller.
  void Start();
  /// Closes the stream; ranks keep running. Calls `on_stopped` on the loop.
  void Stop(std::function<void()> on_stopped);

  [[nodiscard]] const std::string& Name() const { return setup_.name; }
  [[nodiscard]] std::size_t LiveRanks() const;

 private:
  enum class JobPhase {
    kRunning,       ///< RanksStarted was sent
    kLaunchFailed,  ///< LaunchFailed was sent; the ranks started were killed
  };
  struct Job {
    JobPhase phase = JobPhase::kRunning;
    pid_t process_group = 0;
    std::map<int, pid_t> live;  ///< global rank → pid, until reaped
    std::string script_path;
    std::unique_ptr<boost::asio::steady_timer> kill_timer;  ///< armed by Terminate
    std::uint64_t serial = 0;  ///< tells this launch from a later one of the same job id
  };

  [[nodiscard]] v1::Register MakeRegister() const;
  void OnMessage(const v1::ControllerMessage& message);
  void OnLaunch(const v1::Launch& launch);
  void OnSignal(const v1::Signal& signal);
  void OnTerminate(const v1::Terminate& terminate);
  void OnRankExit(std::int64_t job_id, int rank, int wait_status);
  void Release(std::int64_t job_id);
  void SendJobReleased(std::int64_t job_id);
  [[nodiscard]] LaunchPlan MakePlan(const v1::Launch& launch) const;

  boost::asio::io_context& loop_;
  const NodeEnvironment& environment_;
  const NodeSetup setup_;
  ChildReaper& reaper_;
  const ProcessLauncher& launcher_;
  std::map<std::int64_t, Job> jobs_;
  std::uint64_t launches_ = 0;
  AgentSession session_;
};

}  // namespace cohort::agent
