// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/engine/engine_types.h"
#include "cohort/v1/state.pb.h"

/// The controller's durable state: one SQLite database in WAL mode under
/// StateDir, or a PostgreSQL database that several controllers share (one
/// active). The state thread never touches it directly: it hands batches to
/// the store's writer thread (group commit) and reads on its own connection.
namespace cohort::controller {

/// How hard a commit waits for the disk (SQLite's synchronous setting).
enum class StateSync : std::uint8_t {
  kFull,    ///< fsync the WAL at every commit: survives power loss
  kNormal,  ///< fsync at checkpoints only: survives a crash of the controller, not of the machine
  kOff,     ///< never fsync: for tests and benchmarks of everything else
};

/// The SQLite schema this build writes. Older databases are migrated on
/// open; a newer one is refused.
inline constexpr int kSchemaVersion = 8;

/// Everything one turn of the controller changed, committed as one
/// transaction.
struct StateBatch {
  struct JobRow {
    v1::JobRecord record;            ///< without the environment (kept in job_env)
    std::optional<std::string> env;  ///< serialized JobSpec with only `env`: new jobs
  };
  std::vector<JobRow> jobs;
  struct NodeRow {
    std::string name;
    NodeAdmin admin;  ///< drained, DOWN, why, by whom, since when
  };
  std::vector<NodeRow> nodes;
  std::int64_t next_job_id = 0;  ///< 0: unchanged
  /// Fair-share usage: when set, replaces every stored row.
  std::optional<std::vector<v1::UsageRecordProto>> usage;
  /// Operators' partition states: when set, replaces every stored row.
  std::optional<std::vector<PartitionAdmin>> partitions;
  /// What sacctmgr made: when set, replaces what is stored.
  std::optional<v1::AccountingRecord> accounting;
  /// Operators' reservations: when set, replaces every stored row.
  std::optional<std::vector<v1::Reservation>> reservations;
};

/// A stored partition state as the engine takes it; none for a state this
/// controller does not know (a newer one wrote it).
[[nodiscard]] std::optional<PartitionAdmin> PartitionRow(std::string name, std::int64_t state,
                                                         std::int64_t uid, std::int64_t since_ms);

/// What a restarted controller loads.
struct LoadedState {
  std::vector<v1::JobRecord> jobs;  ///< every job not yet finished
  std::int64_t next_job_id = 1;
  std::vector<StateBatch::NodeRow> nodes;
  std::vector<v1::UsageRecordProto> usage;    ///< fair-share usage, as last written
  std::vector<PartitionAdmin> partitions;     ///< operators' partition states
  v1::AccountingRecord accounting;            ///< what sacctmgr made; empty: nothing
  std::vector<v1::Reservation> reservations;  ///< operators' reservations
  int schema_before = 0;                      ///< the version found on disk (0: a new database)
};

/// Filters of `cohort history`. Empty fields do not filter.
struct HistoryQuery {
  std::vector<std::int64_t> job_ids;
  std::optional<std::uint32_t> uid;
  std::string user_name;
  std::string account;
  std::vector<int> states;    ///< v1::JobState values
  std::int64_t since_ms = 0;  ///< ended at or after
  std::int64_t until_ms = 0;  ///< ended before; 0: now
  int limit = 0;              ///< 0: no limit
  bool newest = false;        ///< with limit: the last `limit` to end, still oldest first
};

/// A summary `--check-state` prints.
struct StateReport {
  int schema = 0;
  std::int64_t next_job_id = 0;
  std::int64_t jobs = 0;
  std::int64_t active_jobs = 0;
  std::int64_t nodes = 0;
};

/// One connection to the state database. Not thread-safe: each thread that
/// uses the database opens its own Store. Two engines keep it: SQLite (this
/// file's Open, store.cpp) and PostgreSQL (pg_store.h); both hold the same
/// records and answer the same calls.
class Store {
 public:
  enum class Mode : std::uint8_t { kWrite, kRead };

  /// Opens (kWrite: creates and migrates) the SQLite database `path`. A
  /// damaged database, one written by a newer schema, or one that cannot be
  /// opened is refused with FailedPrecondition saying what to do; nothing is
  /// ever silently reset.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                                   Mode mode, StateSync sync);
  Store() = default;
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Reads what a restarting controller needs.
  [[nodiscard]] virtual absl::StatusOr<LoadedState> Load() = 0;
  /// Commits one batch in one transaction.
  [[nodiscard]] virtual absl::Status Commit(const StateBatch& batch) = 0;
  /// A job's record, finished or not; nullopt when there is none.
  [[nodiscard]] virtual absl::StatusOr<std::optional<v1::JobRecord>> FindJob(std::int64_t id) = 0;
  /// A job's environment as submitted (a JobSpec holding only `env`).
  [[nodiscard]] virtual absl::StatusOr<std::optional<v1::JobSpec>> FindEnvironment(
      std::int64_t id) = 0;
  /// Finished jobs matching `query`, oldest end first.
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::JobRecord>> History(
      const HistoryQuery& query) = 0;
  /// Deletes up to `limit` finished jobs that ended before `before_ms`;
  /// returns how many it deleted (call again while it returns `limit`).
  [[nodiscard]] virtual absl::StatusOr<int> PurgeHistory(std::int64_t before_ms, int limit) = 0;
  /// Full integrity check and a summary of the contents.
  [[nodiscard]] virtual absl::StatusOr<StateReport> Check() = 0;

  /// Leaves checkpoints (copying SQLite's write-ahead log into the
  /// database) to another connection. By default SQLite makes one inside
  /// the commit that takes the log past 1,000 pages: tens of milliseconds of
  /// writes and fsync, every few hundred commits, on the path of every reply
  /// waiting on that commit. Instead `due` is called, on the committing
  /// thread, after each commit that leaves `pages` or more in the log. An
  /// engine without such a log never calls it.
  virtual void HandOffCheckpoints(int /*pages*/, std::function<void()> /*due*/) {}
  /// Copies the log into the database as far as readers allow (a passive
  /// checkpoint), on this connection. Never blocks a writer.
  [[nodiscard]] virtual absl::Status Checkpoint() { return absl::OkStatus(); }

  /// The SQL that creates SQLite's schema version `version` from
  /// `version - 1`. Exposed so tests can build old databases.
  [[nodiscard]] static const std::vector<std::string>& Migrations();
};

/// Whether a job record is in a final state.
[[nodiscard]] bool IsFinishedRecord(const v1::JobRecord& record);

}  // namespace cohort::controller
