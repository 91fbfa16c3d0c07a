// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agents/agent_hub.h"
#include "agents/image_prefetch.h"
#include "agents/nvlink_blocks.h"
#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "cohort/v1/controller_rpcs.h"
#include "controller_state.h"
#include "http/metrics.h"
#include "outbox.h"
#include "rpc/admin_rpcs.h"
#include "rpc/call_rate.h"
#include "rpc/history_rpcs.h"
#include "rpc/job_rpcs.h"
#include "rpc/node_rpcs.h"
#include "rpc/priority_rpcs.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_reader.h"
#include "store/wire.h"
#include "watch_hub.h"
#include "worker.h"

namespace cohort::controller {

/// Owns the engine and every piece of scheduler state on one thread (the
/// state thread, which runs io()), and wires the parts that work on it:
/// the durable outbox (group commit; replies, commands and events wait for
/// what they depend on to be durable), the agent hub, the watch hub and
/// the RPC handlers. It paces scheduling passes and executes the engine's
/// effects. Every public method may be called from any thread: it posts
/// its work to where its part runs and answers through `reply` from
/// there. Nothing here blocks; no lock guards scheduler state.
class Controller final : private EffectSink {
 public:
  struct Options {
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds tick_interval{500};
    std::string state_path;  ///< the SQLite database
    StateSync sync = StateSync::kFull;
    std::chrono::hours history_retention{24 * 30};  ///< 0: keep forever
    std::optional<TokenSigner> tokens;    ///< signs REST API tokens; none: IssueToken refuses
    AdminRpcs::Reconfigurer reconfigure;  ///< `cohort reconfigure`; none: refused
    /// The site's submit policy (JobSubmitPlugins=lua); none: every
    /// submission as given.
    std::shared_ptr<policy::JobSubmitPolicy> job_submit;
  };

  /// Connections to the state database: one writes (the store's thread),
  /// two read (point reads, such as environments of jobs submitted before
  /// a restart, on a reader thread; history queries on theirs), and one
  /// copies the write-ahead log into the database off the writer's path
  /// (checkpoints, on a thread of their own; none: the writer makes them).
  struct Stores {
    std::unique_ptr<Store> writer;
    std::unique_ptr<Store> reader;
    std::unique_ptr<Store> history;
    std::unique_ptr<Store> checkpointer;
  };

  /// `loaded` is what the database held at start.
  Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
             alloc::NodePool pool, Options options, Stores stores, LoadedState loaded);
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  boost::asio::io_context& io() { return io_; }
  /// Starts the periodic tick and the history purge. Call once before
  /// running io().
  void Start();
  /// Waits for the last commit and stops the store's threads. Idempotent.
  void Shutdown();
  /// True when a commit failed: the controller stopped taking work.
  [[nodiscard]] bool Failed() const { return outbox_.Failed(); }
  /// Another controller took over the state database (StateBackend=
  /// postgresql): this one's commits are refused.
  [[nodiscard]] bool Fenced() const {
    return outbox_.Failure().code() == absl::StatusCode::kAborted;
  }

  // One entry point per unary call of the Controller service (see
  // cohort/v1/controller_rpcs.h): posts the call to its part's thread.
#define COHORT_CONTROLLER_DECLARE_RPC(Method, Request, Response, Area, Caller) \
  void Method(v1::Request request, Identity who, Reply<v1::Response> reply);
  COHORT_CONTROLLER_RPCS(COHORT_CONTROLLER_DECLARE_RPC)
#undef COHORT_CONTROLLER_DECLARE_RPC

  /// Registers `watcher` for job `id`; it gets the job now and each change.
  /// NotFound through `reply` when there is no such job; PermissionDenied
  /// when PrivateData=jobs hides it from `who`.
  void Watch(std::int64_t id, Identity who, JobWatcher* watcher, Reply<bool> reply);
  /// Forgets `watcher`, then runs `after` on the state thread (to delete it).
  void Unwatch(JobWatcher* watcher, std::function<void()> after);

  /// What keeps the controller from running on `next` (a reread
  /// cohort.conf and its topology) with the jobs it holds now: a job left
  /// in a partition that is gone, a running job on a node that is gone, a
  /// changed StateDir. Each names the job or setting and the fix; empty
  /// when it may. State thread only (io()).
  [[nodiscard]] std::vector<std::string> CheckReload(const config::ClusterConfig& next,
                                                     const topology::Topology& next_topology) const;

  /// Counts one call of `method` (a literal) that took `took`, for the
  /// metrics.
  void ObserveRpc(std::string_view method, std::chrono::steady_clock::duration took);
  /// The Prometheus exposition of the controller's metrics now
  /// (metrics.h), made on the state thread.
  void Metrics(Reply<std::string> reply);
  /// What the listeners turned away, read at each scrape (any thread):
  /// set by whoever owns them, before Start.
  struct ListenerCounts {
    std::uint64_t rpc_refused = 0;
    std::uint64_t rpc_shed = 0;
    std::uint64_t http_refused = 0;
    std::uint64_t http_shed = 0;
  };
  void CountListeners(std::function<ListenerCounts()> counts) {
    listener_counts_ = std::move(counts);
  }

  /// A message from an agent's stream.
  void OnAgentMessage(AgentLink* link, v1::AgentMessage message);
  /// The stream ended; runs `after` on the state thread once `link` is
  /// forgotten.
  void OnAgentGone(AgentLink* link, std::function<void()> after);

 private:
  template <typename Part>
  Part& PartOf();
  void Restore(LoadedState loaded);
  void Execute(Effects& effects) override;
  void RequestPass();
  void RunPass();
  void ArmTick();
  void Tick();
  void Notify(JobId id);
  /// One log line per change of a job's state, as the engine reported it.
  void LogTransitions(const std::vector<JobTransition>& transitions);
  void LogNodes(const std::vector<NodeId>& nodes);

  ControllerState state_;
  Options options_;
  boost::asio::io_context io_;
  boost::asio::steady_timer tick_timer_{io_};
  bool pass_posted_ = false;
  /// Passes are paced: the next one starts no sooner than the last one took
  /// after it ended, so however long the queue, at least half of the state
  /// thread is left for clients and agents (a pass of 1 ms still runs 500
  /// times a second).
  boost::asio::steady_timer pass_timer_{io_};
  std::chrono::steady_clock::time_point next_pass_{};
  StateRecords records_{state_};
  Outbox outbox_;
  StoreReader reader_;
  WatchHub watch_hub_{outbox_};
  AgentHub agent_hub_;
  NvlinkBlocks nvlink_blocks_;
  ImagePrefetch image_prefetch_;
  JobRpcs job_rpcs_;
  NodeRpcs node_rpcs_;
  PriorityRpcs priority_rpcs_;
  HistoryRpcs history_rpcs_;
  AdminRpcs admin_rpcs_;
  std::vector<NodeStatus> logged_node_status_;  ///< by NodeId: last state logged
  ControllerMetrics metrics_;
  std::function<ListenerCounts()> listener_counts_;
  CallRate call_rate_;  ///< any thread
};

}  // namespace cohort::controller
