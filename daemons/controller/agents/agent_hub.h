// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/store_reader.h"

namespace cohort::controller {

/// The controller's end of one agent's stream. Implemented by the gRPC
/// reactor; Send may be called from the state thread at any time and drops
/// messages once the stream has ended.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void Send(v1::ControllerMessage message) = 0;
  /// Ends the stream with an error status (e.g. a refused registration).
  virtual void Close(absl::Status status) = 0;
  /// The agent's address as the transport saw it (for MASTER_ADDR).
  [[nodiscard]] virtual const std::string& PeerHost() const = 0;
};

/// How the reason of a node drained by its health check begins.
inline constexpr std::string_view kHealthDrainPrefix = "health check failed: ";

/// The agents' streams by node: registration (the node's name, the
/// protocol; a second agent claiming a node whose stream is alive is
/// refused, a newer stream replaces a dead or silent one), what
/// agents report (handed to the engine), and what goes down to them:
/// commands and launches, each sent once the state it follows from is
/// durable. A launch needs the job's environment; for a job submitted
/// before a restart it is read from the store off the state thread, and
/// the job's launches wait for it in order (a job cancelled or requeued
/// meanwhile is not launched). State thread only.
class AgentHub {
 public:
  struct Options {
    std::chrono::milliseconds heartbeat_interval{1000};
    /// A node's answer to PrepareImage (ImagePrefetch); none: dropped.
    std::function<void(NodeId, const v1::ImagePrepared&)> on_image_prepared;
    /// A node registered and its NVLink domain was recorded (NvlinkBlocks).
    std::function<void()> on_nvlink_report;
  };
  AgentHub(ControllerState& state, Outbox& outbox, StoreReader& reader, EffectSink& sink,
           Options options);

  /// A message from `link`'s stream. A link must register first; one that
  /// does not, or is refused, is closed with the reason.
  void OnMessage(AgentLink* link, const v1::AgentMessage& message);
  /// `link`'s stream ended: it is forgotten. The node stays up until
  /// NodeTimeout, so an agent that reconnects in time loses nothing.
  void OnGone(AgentLink* link);
  /// Nodes whose agent's stream is registered now.
  [[nodiscard]] std::size_t ConnectedNodes() const { return links_.size(); }
  /// Reports dropped because they were about a job with no rank on the
  /// reporting node (cohort_agent_reports_refused_total).
  [[nodiscard]] std::uint64_t RefusedReports() const { return refused_reports_; }
  /// Sends one of the engine's commands to its node's agent once durable.
  /// A signal or terminate for a node without a stream then is dropped (a
  /// registering agent reports its jobs instead); a launch to a node
  /// without a stream fails (the gang cannot start whole).
  void Send(const Command& command);
  /// Sends `message` to the node's agent now, not waiting for a commit (for
  /// what depends on no state: PrepareImage). False when it has no stream.
  bool SendNow(NodeId node, v1::ControllerMessage message);

 private:
  struct AwaitedLaunch {
    LaunchCommand launch;
    int attempt = 0;
  };
  void SendToNode(NodeId node, v1::ControllerMessage message);
  void SendLaunch(const LaunchCommand& launch);
  void Register(AgentLink* link, const v1::Register& message);
  [[nodiscard]] absl::Status Refusal(const v1::Register& message, AgentLink* link) const;
  /// A registered link's report. From a node the engine has down, the
  /// link is closed so that the agent registers again; about a job the
  /// engine has not placed on the node, dropped.
  void OnReport(AgentLink* link, NodeId node, const v1::AgentMessage& message);
  /// Drops `link` from the maps (its node's entry only when it is the
  /// node's current link).
  void Forget(AgentLink* link);
  /// HealthCheckProgram's verdict: an unhealthy node is drained with its
  /// reason (kHealthDrainPrefix first), a healthy one the check drained is
  /// resumed; a node an operator drained is left alone.
  /// Prolog= or Epilog= failed on `node`: the node is drained, and after a
  /// prolog the job is requeued.
  void OnScriptFailed(NodeId node, const v1::ScriptFailed& failed, Millis now, Effects& effects);
  void OnHealth(NodeId node, const v1::NodeHealth& health, Effects& effects);
  /// A node's sample of what its launches use (UsageBook): kept for the
  /// launches of jobs that run there; a report past its bounds is refused.
  void OnUsage(NodeId node, const v1::UsageReport& report, Millis now);
  void FailLaunch(const LaunchCommand& launch);
  /// The job's environment when memory has it, else null.
  [[nodiscard]] const v1::JobSpec* KnownEnvironment(const Job& job);
  void ReadEnvironment(const Job& job);
  void EnvironmentRead(JobId id, v1::JobSpec env);
  void Launch(const Job& job, const LaunchCommand& launch, const v1::JobSpec& env);

  ControllerState& state_;
  Outbox& outbox_;
  StoreReader& reader_;
  EffectSink& sink_;
  Options options_;
  std::map<NodeId, AgentLink*> links_;
  std::unordered_map<AgentLink*, NodeId> link_nodes_;
  std::unordered_map<NodeId, Millis> last_heard_;  ///< each node's stream, last message
  std::uint64_t refused_reports_ = 0;
  /// Launches of jobs whose environment is being read, in the order sent.
  std::unordered_map<JobId, std::vector<AwaitedLaunch>> awaiting_env_;
};

}  // namespace cohort::controller
