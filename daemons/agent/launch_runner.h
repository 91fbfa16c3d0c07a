// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "agent_metrics.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "launch_file.h"

/// The seams of one node (AgentNode): what runs its launches, and its link
/// to the controller.
namespace cohort::agent {

/// Queues a message on the node's stream to the controller.
using SendToController = std::function<void(v1::AgentMessage)>;

/// What runs a node's launches and reports them with SendToController
/// (RanksStarted, RankExited, LaunchFailed, JobReleased, ScriptFailed):
/// cohort-stepd processes (StepdRunner), or timers alone under fake
/// execution (FakeRunner). The node validates nothing for it and holds no
/// launch state of its own: each Launch, Signal and Terminate the controller
/// sends is passed on as it came. Lives on, and is used only from, the
/// agent's loop thread.
class LaunchRunner {
 public:
  LaunchRunner() = default;
  LaunchRunner(const LaunchRunner&) = delete;
  LaunchRunner& operator=(const LaunchRunner&) = delete;
  virtual ~LaunchRunner() = default;

  /// Before the node first connects: takes on what an earlier agent left.
  virtual void Start() = 0;
  virtual void Launch(const v1::Launch& launch) = 0;
  virtual void Signal(const v1::Signal& signal) = 0;
  virtual void Terminate(const v1::Terminate& terminate) = 0;
  /// Pulls a pending job's image into the node's cache ahead of its start;
  /// answers with ImagePrepared.
  virtual void PrepareImage(const v1::PrepareImage& prepare) = 0;
  /// Lists the launches alive (running) and those finished lately
  /// (finished) for a new registration.
  virtual void AddTo(v1::Register& message) const = 0;
  /// Every second: catches up on what was missed, forgets old launches.
  virtual void Poll() = 0;
  /// A stepd says its launch has news.
  virtual void OnStepNotice(step::LaunchId id) = 0;
  /// The agent stops: the ranks are left running, every timer cancelled.
  virtual void Stop() = 0;
  /// No controller has been heard from for NodeTimeout: it has declared the
  /// node down and its jobs moved on. Kills every rank here at once (their
  /// ends are reported once a controller is heard again), so that no rank
  /// runs twice.
  virtual void Fence() = 0;
  [[nodiscard]] virtual std::size_t LiveRanks() const = 0;
  /// Adds its counters and the GPUs its live launches hold.
  virtual void AddMetrics(NodeMetrics& metrics) const = 0;
};

/// A node's link to the controller (AgentSession): registers, then carries
/// events one way and orders the other.
class NodeLink {
 public:
  struct Hooks {
    /// Builds the Register message for a new stream.
    std::function<v1::Register()> make_register;
    /// Receives every message but RegisterReply and HeartbeatAck, in order.
    std::function<void(const v1::ControllerMessage&)> on_message;
    /// No controller was heard from for its NodeTimeout (LaunchRunner::Fence).
    std::function<void()> on_fence;
  };

  NodeLink() = default;
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;
  virtual ~NodeLink() = default;

  /// Opens the first stream.
  virtual void Start() = 0;
  /// Queues an event for the controller.
  virtual void Send(v1::AgentMessage event) = 0;
  /// Ends the stream; calls `on_stopped` on the loop once it is done.
  virtual void Stop(std::function<void()> on_stopped) = 0;
};

}  // namespace cohort::agent
