// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cohort/engine/engine.h"
#include "store/store.h"
#include "worker.h"

namespace cohort::controller {

/// What the outbox writes, as the state thread sees it at a flush.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  enum class WithEnv : std::uint8_t { kNo, kYes };
  /// Fills `row` with job `id`'s record as it is now (and its environment
  /// with kYes); false when the job is gone, and nothing is written for it.
  virtual bool JobRow(JobId id, WithEnv with_env, StateBatch::JobRow& row) = 0;
  [[nodiscard]] virtual NodeAdmin Admin(NodeId node) const = 0;
  [[nodiscard]] virtual std::string NodeName(NodeId node) const = 0;
  /// Operators' partition states in force.
  [[nodiscard]] virtual std::vector<PartitionAdmin> PartitionOverrides() const = 0;
  /// The id the next submission gets.
  [[nodiscard]] virtual JobId NextId() const = 0;
  /// Fair-share usage charged up to `now`.
  [[nodiscard]] virtual std::vector<policy::UsageRecord> Usage(Millis now) const = 0;
  /// What sacctmgr made, with its audit.
  [[nodiscard]] virtual v1::AccountingRecord Accounting() const = 0;
  /// Operators' reservations.
  [[nodiscard]] virtual std::vector<v1::Reservation> Reservations() const = 0;
};

/// The durable outbox. Holds replies, agent commands and watch events
/// (each a closure) until every change made before them is committed, and
/// owns what a commit needs: the sets of jobs and nodes changed since the
/// last one, the writer's connection and the store's thread, where one
/// batch at a time is committed (group commit: all that one or more turns
/// of the state thread changed goes in one transaction). Also runs, on the
/// store's thread, the history purge, and hands WAL checkpoints to a thread
/// of their own. Everything but Shutdown is called on the state thread.
class Outbox {
 public:
  /// `state_io` runs the state thread; `writer` is used on the store's
  /// thread only, `checkpointer` (may be null: the writer checkpoints) on
  /// the checkpoint thread only. `node_count` sizes the admin written.
  Outbox(boost::asio::io_context& state_io, RecordSource& source, std::unique_ptr<Store> writer,
         std::unique_ptr<Store> checkpointer, std::size_t node_count);
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  /// What the database held at start: not written again until it changes.
  void LoadedNextId(JobId next_id) { written_next_id_ = next_id; }
  void LoadedAdmin(NodeId node, const NodeAdmin& admin);

  /// Marks the jobs and nodes whose records the next commit writes.
  void MarkChanged(const std::vector<JobId>& jobs, const std::vector<NodeId>& nodes);
  /// An operator changed a partition's state: the next batch writes them all.
  void MarkPartitionsChanged() { dirty_partitions_ = true; }
  /// sacctmgr changed the accounts: the next batch writes them.
  void MarkAccountsChanged() { dirty_accounting_ = true; }
  /// A reservation changed: the next batch writes them all.
  void MarkReservationsChanged() { dirty_reservations_ = true; }
  /// Marks a job never written before: its environment is written once.
  void MarkNew(JobId id) { new_jobs_.insert(id); }

  /// Runs `out` once every change made so far is durable: at once when
  /// nothing is waiting, else after the commit that holds them.
  void Defer(std::function<void()> out);
  /// Answers `reply` with `result` once every change made so far is durable.
  template <typename T>
  void Respond(Reply<T> reply, absl::StatusOr<T> result) {
    Defer([reply = std::move(reply), result = std::move(result)]() mutable {
      reply(std::move(result));
    });
  }
  /// What a commit did, for the metrics: how long the store took, how many
  /// job and node records it wrote, and how many replies, commands and
  /// events waited on it.
  struct CommitReport {
    std::chrono::steady_clock::duration took{};
    std::size_t records = 0;
    std::size_t waiting = 0;
  };
  /// Called on the state thread after each commit that succeeded.
  void OnCommit(std::function<void(const CommitReport&)> observer) {
    on_commit_ = std::move(observer);
  }

  /// Queues a flush after the handlers already queued on the state thread,
  /// so that their changes join the batch. At most one is queued.
  void ScheduleFlush();

  /// Deletes finished jobs older than `retention` on the store's thread,
  /// in chunks, every ten minutes.
  void StartPurge(std::chrono::hours retention);
  /// Stops the store's threads, then writes what is left on the calling
  /// thread (with the usage charged up to now) so that a clean stop loses
  /// nothing. Closures still waiting are dropped. Idempotent.
  void Shutdown();
  /// True once a commit failed: nothing more is acknowledged, and the state
  /// thread's io_context was stopped.
  [[nodiscard]] bool Failed() const { return failed_; }
  /// Why the commit failed; OK while none did. Aborted: the database
  /// refused this controller's commits because another one took over.
  [[nodiscard]] const absl::Status& Failure() const { return failure_; }

  /// While a commit cannot be made for want of space (the store answered
  /// ResourceExhausted), ResourceExhausted saying so, for every call that
  /// would change state; OK otherwise. The batch is tried again every
  /// second, and its answers go out once it lands.
  [[nodiscard]] const absl::Status& WriteRefusal() const { return refusal_; }
  /// Commits that stalled for want of space (cohort_state_write_stalls_total).
  [[nodiscard]] std::uint64_t Stalls() const { return stalls_; }
  /// Marks the answers deferred while it lives as a read's: while commits
  /// stall they go out at once, with state that may not be durable yet,
  /// rather than wait for space.
  class ReadScope {
   public:
    explicit ReadScope(Outbox& outbox) : outbox_(outbox) { outbox_.reading_ = true; }
    ~ReadScope() { outbox_.reading_ = false; }
    ReadScope(const ReadScope&) = delete;
    ReadScope& operator=(const ReadScope&) = delete;

   private:
    Outbox& outbox_;
  };

 private:
  void Flush();
  [[nodiscard]] StateBatch TakeBatch();
  void Commit(StateBatch batch, std::vector<std::function<void()>> out);
  void Committed(const absl::Status& status, const CommitReport& report, StateBatch& batch,
                 std::vector<std::function<void()>>& out);
  void PurgeHistory(std::chrono::hours retention);
  void HandOffCheckpoints();

  boost::asio::io_context& state_io_;
  RecordSource& source_;
  std::unique_ptr<Store> store_;         ///< used on store_thread_ only
  std::unique_ptr<Store> checkpointer_;  ///< used on checkpoint_thread_ only
  Worker store_thread_;
  Worker checkpoint_thread_;
  std::atomic<bool> checkpoint_posted_{false};  ///< one checkpoint queued at a time
  boost::asio::steady_timer purge_timer_{store_thread_.io()};
  std::set<JobId> dirty_jobs_;
  std::set<JobId> new_jobs_;  ///< dirty and never written
  std::set<NodeId> dirty_nodes_;
  bool dirty_partitions_ = false;
  bool dirty_accounting_ = false;
  bool dirty_reservations_ = false;
  /// Whether anything changed waits for a commit.
  [[nodiscard]] bool Dirty() const {
    return !dirty_jobs_.empty() || !dirty_nodes_.empty() || dirty_partitions_ ||
           dirty_accounting_ || dirty_reservations_;
  }
  std::vector<NodeAdmin> written_admin_;  ///< by NodeId: as last written
  JobId written_next_id_ = 0;
  /// When fair-share usage was last written; it is written at most every
  /// kUsageWriteInterval (and at a clean stop).
  Millis usage_written_{0};
  std::vector<std::function<void()>> outbox_;
  bool committing_ = false;
  bool flush_posted_ = false;
  bool failed_ = false;
  absl::Status failure_;
  bool stalled_ = false;      ///< a batch waits for space; no other is taken
  StateBatch stalled_batch_;  ///< while stalled_: the batch, tried again every second
  std::vector<std::function<void()>> stalled_out_;  ///< what waits on it
  absl::Status refusal_;
  std::uint64_t stalls_ = 0;
  bool reading_ = false;  ///< ReadScope
  boost::asio::steady_timer retry_timer_{state_io_};
  std::function<void(const CommitReport&)> on_commit_;
};

}  // namespace cohort::controller
