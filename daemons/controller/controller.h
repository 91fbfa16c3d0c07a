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

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <thread>

#include "absl/status/statusor.h"
#include "cohort/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "store.h"
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

/// One thread running its own io_context until stopped.
class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  boost::asio::io_context& io() { return io_; }
  /// Lets queued work finish, then joins the thread.
  void Stop();

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

/// Owns the engine and every piece of scheduler state on one thread (the
/// state thread, which runs io()). Every public method may be called from
/// any thread: it posts its work to the state thread and answers through
/// `reply` from there. Nothing here blocks; no lock guards scheduler state.
///
/// Durability: every change of a turn of the state thread is written by the
/// store's thread in one transaction (group commit); replies, agent commands
/// and watch events wait in an outbox until what they depend on is durable,
/// so nothing a client or agent was told is lost by a crash.
class Controller {
 public:
  struct Options {
    std::string auth_key;
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds tick_interval{500};
    std::string state_path;  ///< the SQLite database
    StateSync sync = StateSync::kFull;
    std::chrono::hours history_retention{24 * 30};  ///< 0: keep forever
  };

  /// Connections to the state database: one writes (the store's thread),
  /// two read (the state thread; history queries), and one copies the
  /// write-ahead log into the database off the writer's path (checkpoints,
  /// on a thread of their own; none: the writer makes them).
  struct Stores {
    std::unique_ptr<Store> writer;
    std::unique_ptr<Store> reader;
    std::unique_ptr<Store> history;
    std::unique_ptr<Store> checkpointer;
  };

  /// `loaded` is what the database held at start.
  Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
             alloc::NodePool pool, Options options, Stores stores, LoadedState loaded);
  ~Controller();

  boost::asio::io_context& io() { return io_; }
  /// Starts the periodic tick and the history purge. Call once before
  /// running io().
  void Start();
  /// Waits for the last commit and stops the store's threads.
  void Shutdown();
  /// True when a commit failed: the controller stopped taking work.
  [[nodiscard]] bool Failed() const { return failed_; }

  void SubmitJob(v1::SubmitJobRequest request, Identity who, Reply<v1::SubmitJobResponse> reply);
  void CancelJob(v1::CancelJobRequest request, Identity who, Reply<v1::CancelJobResponse> reply);
  void GetJob(v1::GetJobRequest request, Identity who, Reply<v1::GetJobResponse> reply);
  void ListJobs(v1::ListJobsRequest request, Identity who, Reply<v1::ListJobsResponse> reply);
  void JobHistory(v1::JobHistoryRequest request, Identity who, Reply<v1::JobHistoryResponse> reply);
  void ListNodes(v1::ListNodesRequest request, Reply<v1::ListNodesResponse> reply);
  void UpdateNode(v1::UpdateNodeRequest request, Identity who, Reply<v1::UpdateNodeResponse> reply);
  void GetTopology(Reply<v1::GetTopologyResponse> reply);
  void ControlJobs(v1::ControlJobsRequest request, Identity who, Reply<v1::ControlJobsResponse> reply);
  void ExplainJob(v1::ExplainJobRequest request, Reply<v1::ExplainJobResponse> reply);
  void GetPriorities(v1::PriorityRequest request, Reply<v1::PriorityResponse> reply);
  void GetShares(Reply<v1::SharesResponse> reply);

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
  void Restore(LoadedState loaded);
  void Execute(Effects& effects);
  /// Runs `out` once every change made so far is durable.
  void Defer(std::function<void()> out);
  template <typename T>
  void Respond(Reply<T> reply, absl::StatusOr<T> result) {
    Defer([reply = std::move(reply), result = std::move(result)]() mutable { reply(std::move(result)); });
  }
  void ScheduleFlush();
  void Flush();
  void Committed(const absl::Status& status, std::vector<std::function<void()>>& out);
  void PurgeHistory();
  /// A job's environment for its launch: kept since submission, or read back.
  const v1::JobSpec& EnvironmentOf(JobId id);
  void SendToNode(NodeId node, v1::ControllerMessage message);
  void RequestPass();
  void ArmTick();
  void Tick();
  void Notify(JobId id);
  void SendLaunch(const LaunchCommand& launch);
  void FailLaunch(const LaunchCommand& launch);
  void Register(AgentLink* link, const v1::Register& message);

  config::ClusterConfig config_;
  NodeKinds node_kinds_{config_};  ///< for checking bindings at submission
  std::unique_ptr<topology::Topology> topology_;
  Engine engine_;
  Options options_;
  boost::asio::io_context io_;
  boost::asio::steady_timer tick_timer_;
  bool pass_posted_ = false;
  /// Passes are paced: the next one starts no sooner than the last one took
  /// after it ended, so however long the queue, at least half of the state
  /// thread is left for clients and agents (a pass of 1 ms still runs 500
  /// times a second).
  boost::asio::steady_timer pass_timer_{io_};
  std::chrono::steady_clock::time_point next_pass_{};

  std::unordered_map<JobId, v1::JobSpec> specs_;  ///< as submitted, without the environment
  std::unordered_map<JobId, v1::JobSpec> envs_;   ///< environments, until the job ends
  /// Where each rank of a running job runs, as its agents reported.
  std::unordered_map<JobId, std::vector<v1::RankBinding>> bindings_;
  std::unique_ptr<Store> store_;                  ///< used on store_thread_ only
  std::unique_ptr<Store> reader_;                 ///< used on the state thread only
  Worker store_thread_;
  Worker history_thread_;
  std::unique_ptr<Store> history_reader_;         ///< used on history_thread_ only
  std::unique_ptr<Store> checkpointer_;           ///< used on checkpoint_thread_ only
  Worker checkpoint_thread_;
  std::atomic<bool> checkpoint_posted_{false};  ///< one checkpoint queued at a time
  boost::asio::steady_timer purge_timer_{store_thread_.io()};
  std::set<JobId> dirty_jobs_;
  std::set<JobId> new_jobs_;                      ///< dirty and never written
  std::set<NodeId> dirty_nodes_;
  std::vector<NodeAdmin> written_admin_;          ///< by NodeId: as last written
  JobId written_next_id_ = 0;
  /// When fair-share usage was last written; it is written at most every
  /// kUsageWriteInterval (and at a clean stop).
  Millis usage_written_{0};
  std::vector<std::function<void()>> outbox_;
  bool committing_ = false;
  bool flush_posted_ = false;
  bool failed_ = false;
  std::map<NodeId, AgentLink*> links_;
  std::unordered_map<AgentLink*, NodeId> link_nodes_;
  std::multimap<JobId, JobWatcher*> watchers_;
  /// Watchers of jobs that just finished: their last event is on its way.
  std::set<JobWatcher*> finished_watchers_;
  std::map<JobId, JobState> logged_state_;
  std::vector<NodeStatus> logged_node_status_;  ///< by NodeId: last state logged
};

}  // namespace cohort::controller
