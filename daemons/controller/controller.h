// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/statusor.h"
#include "cohort/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "wire.h"

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

/// A client waiting for changes of one job (WatchJob).
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  /// Sends one event; `last` ends the stream after it.
  enum class Last : std::uint8_t { kNo, kYes };
  virtual void Push(v1::JobEvent event, Last last) = 0;
};

template <typename T>
using Reply = std::function<void(absl::StatusOr<T>)>;

/// Owns the engine and every piece of scheduler state on one thread (the
/// state thread, which runs io()). Every public method may be called from
/// any thread: it posts its work to the state thread and answers through
/// `reply` from there. Nothing here blocks; no lock guards scheduler state.
class Controller {
 public:
  struct Options {
    std::string auth_key;
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds tick_interval{500};
  };

  Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
             alloc::NodePool pool, Options options);

  boost::asio::io_context& io() { return io_; }
  /// Starts the periodic tick. Call once before running io().
  void Start();

  void SubmitJob(v1::SubmitJobRequest request, Identity who, Reply<v1::SubmitJobResponse> reply);
  void CancelJob(v1::CancelJobRequest request, Identity who, Reply<v1::CancelJobResponse> reply);
  void GetJob(v1::GetJobRequest request, Identity who, Reply<v1::GetJobResponse> reply);
  void ListJobs(v1::ListJobsRequest request, Identity who, Reply<v1::ListJobsResponse> reply);
  void ListNodes(v1::ListNodesRequest request, Reply<v1::ListNodesResponse> reply);
  void UpdateNode(v1::UpdateNodeRequest request, Identity who, Reply<v1::UpdateNodeResponse> reply);
  void GetTopology(Reply<v1::GetTopologyResponse> reply);

  /// Registers `watcher` for job `id`; it gets the job now and each change.
  /// NotFound through `reply` when there is no such job.
  void Watch(std::int64_t id, JobWatcher* watcher, Reply<bool> reply);
  /// Forgets `watcher`, then runs `after` on the state thread (to delete it).
  void Unwatch(JobWatcher* watcher, std::function<void()> after);

  /// A message from an agent's stream.
  void OnAgentMessage(AgentLink* link, v1::AgentMessage message);
  /// The stream ended; runs `after` on the state thread once `link` is
  /// forgotten.
  void OnAgentGone(AgentLink* link, std::function<void()> after);

 private:
  static Millis Now();
  void Execute(Effects& effects);
  void RequestPass();
  void Tick();
  void Notify(JobId id);
  void SendLaunch(const LaunchCommand& launch);
  void Register(AgentLink* link, const v1::Register& message);

  config::ClusterConfig config_;
  std::unique_ptr<topology::Topology> topology_;
  Engine engine_;
  Options options_;
  boost::asio::io_context io_;
  boost::asio::steady_timer tick_timer_;
  bool pass_posted_ = false;

  std::unordered_map<JobId, v1::JobSpec> specs_;  ///< what only the launch needs
  std::map<NodeId, AgentLink*> links_;
  std::unordered_map<AgentLink*, NodeId> link_nodes_;
  std::multimap<JobId, JobWatcher*> watchers_;
  std::map<JobId, JobState> logged_state_;
  std::vector<NodeStatus> logged_node_status_;  ///< by NodeId: last state logged
};

}  // namespace cohort::controller
