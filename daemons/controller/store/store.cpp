// SPDX-License-Identifier: Apache-2.0
#include "store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <functional>
#include <type_traits>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/fmt_absl.h"
#include "store/job_record.h"

namespace cohort::controller {
namespace {

// "CHRT": tells a Cohort state database from any other SQLite file.
constexpr int kApplicationId = 0x43485254;

std::string Recovery(const std::string& path) {
  return fmt::format(
      "run `cohort-controller --check-state` for details, then restore the latest backup (see "
      "docs/operations.md, \"Backing up and restoring state\"), or move {} (and its -wal and -shm "
      "files) aside to start an empty cluster, losing its jobs",
      path);
}

}  // namespace

// RAII for one prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      stmt_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  [[nodiscard]] bool Ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }
  /// Resets the statement for another use (bindings cleared).
  sqlite3_stmt* Fresh() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return stmt_;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

namespace {

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void BindBlob(sqlite3_stmt* stmt, int index, const std::string& bytes) {
  sqlite3_bind_blob(stmt, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
}
std::string ColumnBytes(sqlite3_stmt* stmt, int index) {
  const void* data = sqlite3_column_blob(stmt, index);
  const int size = sqlite3_column_bytes(stmt, index);
  return data == nullptr
             ? std::string()
             : std::string(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

}  // namespace

// The SQLite engine: one file in WAL mode.
class SqliteStore final : public Store {
 public:
  // Defined once Statements is complete: a constructor that may throw
  // destroys statements_.
  SqliteStore(sqlite3* db, std::string path);
  ~SqliteStore() override;

  absl::StatusOr<LoadedState> Load() override;
  absl::Status Commit(const StateBatch& batch) override;
  absl::StatusOr<std::optional<v1::JobRecord>> FindJob(std::int64_t id) override;
  absl::StatusOr<std::optional<v1::JobSpec>> FindEnvironment(std::int64_t id) override;
  absl::StatusOr<std::vector<v1::JobRecord>> History(const HistoryQuery& query) override;
  absl::StatusOr<int> PurgeHistory(std::int64_t before_ms, int limit) override;
  absl::StatusOr<StateReport> Check() override;
  void HandOffCheckpoints(int pages, std::function<void()> due) override;
  absl::Status Checkpoint() override;

  // Open's steps.
  absl::Status Migrate(int& found);
  absl::Status Exec(const char* sql);
  absl::Status Error(std::string_view what) const;
  absl::Status Prepare();

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  int checkpoint_pages_ = 0;
  std::function<void()> checkpoint_due_;
  struct Statements;
  std::unique_ptr<Statements> statements_;
};

bool IsFinishedRecord(const v1::JobRecord& record) {
  switch (record.state()) {
    case v1::JOB_COMPLETED:
    case v1::JOB_FAILED:
    case v1::JOB_CANCELLED:
    case v1::JOB_TIMEOUT:
    case v1::JOB_NODE_FAIL:
      return true;
    default:
      return false;
  }
}

struct SqliteStore::Statements {
  explicit Statements(sqlite3* db)
      : upsert_job(db,
                   "INSERT INTO jobs(id, state, finished, uid, user, account, partition, "
                   "submit_ms, end_ms, record) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
                   "ON CONFLICT(id) DO UPDATE SET state = ?2, finished = ?3, end_ms = ?9, "
                   "account = ?6, partition = ?7, record = ?10"),
        insert_env(db, "INSERT OR REPLACE INTO job_env(id, spec) VALUES(?1, ?2)"),
        delete_env(db, "DELETE FROM job_env WHERE id = ?1"),
        upsert_node(db,
                    "INSERT INTO nodes(name, drain, reason, down, uid, since_ms) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name) DO UPDATE SET drain = ?2, "
                    "reason = ?3, down = ?4, uid = ?5, since_ms = ?6"),
        set_next_id(db, "INSERT OR REPLACE INTO meta(key, value) VALUES('next_job_id', ?1)"),
        find_job(db, "SELECT record FROM jobs WHERE id = ?1"),
        find_env(db, "SELECT spec FROM job_env WHERE id = ?1"),
        begin(db, "BEGIN IMMEDIATE"),
        commit(db, "COMMIT"),
        rollback(db, "ROLLBACK") {}

  [[nodiscard]] bool Ok() const {
    return upsert_job.Ok() && insert_env.Ok() && delete_env.Ok() && upsert_node.Ok() &&
           set_next_id.Ok() && find_job.Ok() && find_env.Ok() && begin.Ok() && commit.Ok() &&
           rollback.Ok();
  }

  Statement upsert_job;
  Statement insert_env;
  Statement delete_env;
  Statement upsert_node;
  Statement set_next_id;
  Statement find_job;
  Statement find_env;
  Statement begin;
  Statement commit;
  Statement rollback;
};

SqliteStore::SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

std::optional<PartitionAdmin> PartitionRow(std::string name, std::int64_t state, std::int64_t uid,
                                           std::int64_t since_ms) {
  if (state < 0 || state > static_cast<std::int64_t>(config::PartitionState::kInactive)) {
    return std::nullopt;
  }
  return PartitionAdmin{
      .name = std::move(name),
      .state = static_cast<config::PartitionState>(state),
      .uid = uid >= 0 ? std::optional(static_cast<std::uint32_t>(uid)) : std::nullopt,
      .since = Millis(since_ms)};
}

const std::vector<std::string>& Store::Migrations() {
  // Entry i takes the schema from version i to i + 1. Append only.
  static const std::vector<std::string> migrations = {
      // 1: jobs, their environments, and the next id.
      "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
      "CREATE TABLE jobs(id INTEGER PRIMARY KEY, state INTEGER NOT NULL, finished INTEGER NOT "
      "NULL, uid INTEGER NOT NULL, user TEXT NOT NULL, account TEXT NOT NULL, partition TEXT NOT "
      "NULL, submit_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, record BLOB NOT NULL);"
      "CREATE INDEX jobs_active ON jobs(id) WHERE finished = 0;"
      "CREATE TABLE job_env(id INTEGER PRIMARY KEY, spec BLOB NOT NULL);",
      // 2: operators' node settings, and history by end time.
      "CREATE TABLE nodes(name TEXT PRIMARY KEY, drain INTEGER NOT NULL, reason TEXT NOT NULL) "
      "WITHOUT ROWID;"
      "CREATE INDEX jobs_ended ON jobs(end_ms) WHERE finished = 1;",
      // 3: fair-share usage per account (user '') and per user in it.
      "CREATE TABLE usage(account TEXT NOT NULL, user TEXT NOT NULL, usage REAL NOT NULL, "
      "as_of_ms INTEGER NOT NULL, PRIMARY KEY(account, user)) WITHOUT ROWID;",
      // 4: job records keep the engine job's groups (run, wait, array,
      // preemption) in messages of their own. Records of version 3 are read
      // as they are (ParseJobRecord); a controller of version 3 would read
      // version 4's as jobs that never ran, so it is refused the database.
      "SELECT 1;",
      // 5: a node set DOWN by an operator, who set a node's state and when
      // (sinfo -R), and operators' partition states (State=, a
      // config::PartitionState).
      "ALTER TABLE nodes ADD COLUMN down INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE nodes ADD COLUMN uid INTEGER NOT NULL DEFAULT -1;"
      "ALTER TABLE nodes ADD COLUMN since_ms INTEGER NOT NULL DEFAULT 0;"
      "CREATE TABLE partitions(name TEXT PRIMARY KEY, state INTEGER NOT NULL, uid INTEGER NOT "
      "NULL, since_ms INTEGER NOT NULL) WITHOUT ROWID;",
      // 6: budgets' undecayed use per usage period, and what sacctmgr made
      // (a v1::AccountingRecord in one row).
      "ALTER TABLE usage ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0;"
      "ALTER TABLE usage ADD COLUMN cpu_seconds REAL NOT NULL DEFAULT 0;"
      "ALTER TABLE usage ADD COLUMN period_start_ms INTEGER NOT NULL DEFAULT 0;"
      "CREATE TABLE accounting(id INTEGER PRIMARY KEY CHECK (id = 1), record BLOB NOT NULL);",
      // 7: operators' reservations (a v1::Reservation a row).
      "CREATE TABLE reservations(name TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID;",
      // 8: each QOS's use this usage period (its GrpTRESMins budgets).
      "CREATE TABLE qos_usage(name TEXT PRIMARY KEY, gpu_seconds REAL NOT NULL, cpu_seconds REAL "
      "NOT NULL, period_start_ms INTEGER NOT NULL) WITHOUT ROWID;",
  };
  COHORT_CHECK(static_cast<int>(migrations.size()) == kSchemaVersion, "one migration per version");
  return migrations;
}

SqliteStore::~SqliteStore() {
  statements_.reset();
  sqlite3_close_v2(db_);
}

absl::Status SqliteStore::Error(std::string_view what) const {
  const int code = sqlite3_extended_errcode(db_);
  const std::string message = sqlite3_errmsg(db_);
  if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) {
    return absl::FailedPreconditionError(fmt::format(
        "state database {} is damaged ({} while {}); the controller will not start on it: {}",
        path_, message, what, Recovery(path_)));
  }
  // A write the file system refused for want of space comes back as
  // SQLITE_FULL, or as an I/O error whose errno says so.
  if ((code & 0xff) == SQLITE_FULL ||
      ((code & 0xff) == SQLITE_IOERR &&
       (sqlite3_system_errno(db_) == ENOSPC || sqlite3_system_errno(db_) == EDQUOT))) {
    return absl::ResourceExhaustedError(fmt::format(
        "state database {}: the disk is full ({}); free space in StateDir", path_, what));
  }
  return absl::UnavailableError(
      fmt::format("state database {}: {} while {}", path_, message, what));
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    sqlite3_free(message);
    return Error(fmt::format("running \"{:.40}\"", sql));
  }
  return absl::OkStatus();
}

namespace {

// The database holds every job's environment (tokens, keys): it and its
// logs are readable by the controller's user alone. SQLite gives the log
// files the database's mode, so the database is made 0600 before SQLite
// opens it, and files an older version made readable are narrowed.
absl::Status KeepStateFilesPrivate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        fmt::format("cannot open state database {}: {}; check StateDir "
                    "exists and this user may write it",
                    path, std::strerror(errno)));
  }
  ::close(fd);
  for (const std::string& file : {path, path + "-wal", path + "-shm", path + "-journal"}) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || (st.st_mode & 077) == 0) continue;
    if (::chmod(file.c_str(), 0600) != 0) {
      return absl::FailedPreconditionError(
          fmt::format("{} is readable by other users (mode {:04o}) and cannot be made 0600: {}; "
                      "run chmod 0600 {}",
                      file, st.st_mode & 07777, std::strerror(errno), file));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, Mode mode,
                                                   StateSync sync) {
  if (mode == Mode::kWrite) {
    if (absl::Status private_files = KeepStateFilesPrivate(path); !private_files.ok()) {
      return private_files;
    }
  }
  sqlite3* db = nullptr;
  const int flags =
      (mode == Mode::kWrite ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
      SQLITE_OPEN_NOMUTEX;
  const int opened = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  auto store = std::make_unique<SqliteStore>(db, path);
  if (opened != SQLITE_OK) {
    return absl::UnavailableError(
        fmt::format("cannot open state database {}: {}; check StateDir "
                    "exists and this user may write it",
                    path, db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_extended_result_codes(db, 1);
  // The first read tells a damaged file or a foreign one.
  sqlite3_stmt* probe = nullptr;
  int user_version = 0;
  int application_id = 0;
  int objects = 0;
  for (const auto& [sql, out] : {std::pair{"PRAGMA user_version", &user_version},
                                 std::pair{"PRAGMA application_id", &application_id},
                                 std::pair{"SELECT count(*) FROM sqlite_schema", &objects}}) {
    if (sqlite3_prepare_v2(db, sql, -1, &probe, nullptr) != SQLITE_OK ||
        sqlite3_step(probe) != SQLITE_ROW) {
      sqlite3_finalize(probe);
      return store->Error("reading its header");
    }
    *out = sqlite3_column_int(probe, 0);
    sqlite3_finalize(probe);
  }
  if (objects > 0 && application_id != kApplicationId) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is an SQLite database but not Cohort's state; point StateDir elsewhere", path));
  }
  if (user_version > kSchemaVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "state database {} has schema version {}, newer than this cohort-controller knows ({}); "
        "run the newer controller, or restore a backup made with this version (docs/operations.md)",
        path, user_version, kSchemaVersion));
  }
  if (mode == Mode::kWrite) {
    if (absl::Status s = store->Exec("PRAGMA journal_mode = WAL"); !s.ok()) return s;
    const char* synchronous = sync == StateSync::kFull     ? "PRAGMA synchronous = FULL"
                              : sync == StateSync::kNormal ? "PRAGMA synchronous = NORMAL"
                                                           : "PRAGMA synchronous = OFF";
    if (absl::Status s = store->Exec(synchronous); !s.ok()) return s;
    int found = user_version;
    if (absl::Status s = store->Migrate(found); !s.ok()) return s;
  } else if (user_version < kSchemaVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "state database {} has schema version {}; start cohort-controller once to migrate it to {}",
        path, user_version, kSchemaVersion));
  }
  if (absl::Status s = store->Prepare(); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

absl::Status SqliteStore::Prepare() {
  statements_ = std::make_unique<Statements>(db_);
  if (!statements_->Ok()) return Error("preparing its statements");
  return absl::OkStatus();
}

void SqliteStore::HandOffCheckpoints(int pages, std::function<void()> due) {
  checkpoint_pages_ = pages;
  checkpoint_due_ = std::move(due);
  // A WAL hook replaces SQLite's automatic checkpoints on this connection.
  sqlite3_wal_hook(
      db_,
      [](void* self, sqlite3* /*db*/, const char* /*name*/, int in_log) {
        auto& store = *static_cast<SqliteStore*>(self);
        if (in_log >= store.checkpoint_pages_) store.checkpoint_due_();
        return SQLITE_OK;
      },
      this);
}

absl::Status SqliteStore::Checkpoint() {
  int in_log = 0;
  int copied = 0;
  if (sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &in_log, &copied) !=
      SQLITE_OK) {
    return Error("copying its log into it (checkpoint)");
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Migrate(int& found) {
  const std::vector<std::string>& migrations = Migrations();
  const int from = found;
  for (int version = from; version < kSchemaVersion; ++version) {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    absl::Status step = Exec(migrations[static_cast<std::size_t>(version)].c_str());
    if (step.ok()) {
      step = Exec(fmt::format("PRAGMA user_version = {}; PRAGMA application_id = {}", version + 1,
                              kApplicationId)
                      .c_str());
    }
    if (!step.ok()) {
      (void)Exec("ROLLBACK");
      return absl::Status(step.code(), fmt::format("migrating the state to schema version {}: {}",
                                                   version + 1, step.message()));
    }
    if (absl::Status s = Exec("COMMIT"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedState> SqliteStore::Load() {
  LoadedState state;
  state.schema_before = kSchemaVersion;
  Statement jobs(db_, "SELECT record FROM jobs WHERE finished = 0 ORDER BY id");
  Statement meta(db_, "SELECT value FROM meta WHERE key = 'next_job_id'");
  Statement max_id(db_, "SELECT coalesce(max(id), 0) FROM jobs");
  Statement nodes(db_, "SELECT name, drain, reason, down, uid, since_ms FROM nodes ORDER BY name");
  if (!jobs.Ok() || !meta.Ok() || !max_id.Ok() || !nodes.Ok()) return Error("preparing the load");
  int rc = 0;
  while ((rc = sqlite3_step(jobs.get())) == SQLITE_ROW) {
    v1::JobRecord& record = state.jobs.emplace_back();
    const void* data = sqlite3_column_blob(jobs.get(), 0);
    if (!ParseJobRecord({static_cast<const char*>(data),
                         static_cast<std::size_t>(sqlite3_column_bytes(jobs.get(), 0))},
                        record)) {
      return absl::FailedPreconditionError(fmt::format(
          "state database {}: a job record cannot be read; the controller will not start on it: {}",
          path_, Recovery(path_)));
    }
  }
  if (rc != SQLITE_DONE) return Error("loading jobs");
  if ((rc = sqlite3_step(meta.get())) == SQLITE_ROW) {
    state.next_job_id = sqlite3_column_int64(meta.get(), 0);
  } else if (rc != SQLITE_DONE) {
    return Error("loading the next job id");
  }
  if (sqlite3_step(max_id.get()) != SQLITE_ROW) return Error("loading the largest job id");
  // Never hand out an id a job already has, whatever the meta row says.
  state.next_job_id =
      std::max<std::int64_t>(state.next_job_id, sqlite3_column_int64(max_id.get(), 0) + 1);
  while ((rc = sqlite3_step(nodes.get())) == SQLITE_ROW) {
    StateBatch::NodeRow& row = state.nodes.emplace_back();
    row.name = reinterpret_cast<const char*>(sqlite3_column_text(nodes.get(), 0));
    row.admin.drain = sqlite3_column_int(nodes.get(), 1) != 0;
    row.admin.reason = reinterpret_cast<const char*>(sqlite3_column_text(nodes.get(), 2));
    row.admin.down = sqlite3_column_int(nodes.get(), 3) != 0;
    if (const std::int64_t uid = sqlite3_column_int64(nodes.get(), 4); uid >= 0) {
      row.admin.uid = static_cast<std::uint32_t>(uid);
    }
    row.admin.since = Millis(sqlite3_column_int64(nodes.get(), 5));
  }
  if (rc != SQLITE_DONE) return Error("loading node settings");
  Statement usage(db_,
                  "SELECT account, user, usage, as_of_ms, gpu_seconds, cpu_seconds, "
                  "period_start_ms FROM usage ORDER BY account, user");
  if (!usage.Ok()) return Error("preparing the usage load");
  while ((rc = sqlite3_step(usage.get())) == SQLITE_ROW) {
    v1::UsageRecordProto& u = state.usage.emplace_back();
    u.set_account(reinterpret_cast<const char*>(sqlite3_column_text(usage.get(), 0)));
    u.set_user(reinterpret_cast<const char*>(sqlite3_column_text(usage.get(), 1)));
    u.set_usage(sqlite3_column_double(usage.get(), 2));
    u.set_as_of_ms(sqlite3_column_int64(usage.get(), 3));
    u.set_gpu_seconds(sqlite3_column_double(usage.get(), 4));
    u.set_cpu_seconds(sqlite3_column_double(usage.get(), 5));
    u.set_period_start_ms(sqlite3_column_int64(usage.get(), 6));
  }
  if (rc != SQLITE_DONE) return Error("loading fair-share usage");
  Statement qos_usage(db_, "SELECT name, gpu_seconds, cpu_seconds, period_start_ms FROM qos_usage");
  if (!qos_usage.Ok()) return Error("preparing the QOS usage load");
  while ((rc = sqlite3_step(qos_usage.get())) == SQLITE_ROW) {
    v1::UsageRecordProto& u = state.usage.emplace_back();
    u.set_qos(reinterpret_cast<const char*>(sqlite3_column_text(qos_usage.get(), 0)));
    u.set_gpu_seconds(sqlite3_column_double(qos_usage.get(), 1));
    u.set_cpu_seconds(sqlite3_column_double(qos_usage.get(), 2));
    u.set_period_start_ms(sqlite3_column_int64(qos_usage.get(), 3));
  }
  if (rc != SQLITE_DONE) return Error("loading QOS usage");
  Statement accounting(db_, "SELECT record FROM accounting WHERE id = 1");
  if (!accounting.Ok()) return Error("preparing the accounts' load");
  if ((rc = sqlite3_step(accounting.get())) == SQLITE_ROW) {
    const void* blob = sqlite3_column_blob(accounting.get(), 0);
    const int size = sqlite3_column_bytes(accounting.get(), 0);
    if (!state.accounting.ParseFromArray(blob, size)) {
      return absl::DataLossError(
          "the accounts sacctmgr made (table accounting) do not parse; restore the database "
          "from a backup");
    }
    rc = sqlite3_step(accounting.get());
  }
  if (rc != SQLITE_DONE) return Error("loading the accounts");
  Statement reservations(db_, "SELECT record FROM reservations ORDER BY name");
  if (!reservations.Ok()) return Error("preparing the reservations' load");
  while ((rc = sqlite3_step(reservations.get())) == SQLITE_ROW) {
    const void* blob = sqlite3_column_blob(reservations.get(), 0);
    const int size = sqlite3_column_bytes(reservations.get(), 0);
    if (!state.reservations.emplace_back().ParseFromArray(blob, size)) {
      return absl::DataLossError(
          "a reservation (table reservations) does not parse; restore the database from a "
          "backup");
    }
  }
  if (rc != SQLITE_DONE) return Error("loading reservations");
  Statement partitions(db_, "SELECT name, state, uid, since_ms FROM partitions ORDER BY name");
  if (!partitions.Ok()) return Error("preparing the partitions' load");
  while ((rc = sqlite3_step(partitions.get())) == SQLITE_ROW) {
    std::optional<PartitionAdmin> row = PartitionRow(
        reinterpret_cast<const char*>(sqlite3_column_text(partitions.get(), 0)),
        sqlite3_column_int64(partitions.get(), 1), sqlite3_column_int64(partitions.get(), 2),
        sqlite3_column_int64(partitions.get(), 3));
    if (row) state.partitions.push_back(*std::move(row));
  }
  if (rc != SQLITE_DONE) return Error("loading partition states");
  return state;
}

absl::Status SqliteStore::Commit(const StateBatch& batch) {
  Statements& s = *statements_;
  if (sqlite3_step(s.begin.Fresh()) != SQLITE_DONE) return Error("beginning a transaction");
  auto fail = [&](std::string_view what) {
    absl::Status status = Error(what);
    sqlite3_step(s.rollback.Fresh());
    return status;
  };
  std::string bytes;
  for (const StateBatch::JobRow& row : batch.jobs) {
    const v1::JobRecord& r = row.record;
    const bool finished = IsFinishedRecord(r);
    bytes.clear();
    r.SerializeToString(&bytes);
    sqlite3_stmt* stmt = s.upsert_job.Fresh();
    sqlite3_bind_int64(stmt, 1, r.id());
    sqlite3_bind_int(stmt, 2, r.state());
    sqlite3_bind_int(stmt, 3, finished ? 1 : 0);
    sqlite3_bind_int64(stmt, 4, r.uid());
    BindText(stmt, 5, r.user_name());
    BindText(stmt, 6, r.account());
    BindText(stmt, 7, r.partition());
    sqlite3_bind_int64(stmt, 8, r.submit_time_ms());
    sqlite3_bind_int64(stmt, 9, r.run().end_time_ms());
    BindBlob(stmt, 10, bytes);
    if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing a job");
    if (row.env && !finished) {
      stmt = s.insert_env.Fresh();
      sqlite3_bind_int64(stmt, 1, r.id());
      BindBlob(stmt, 2, *row.env);
      if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing a job's environment");
    } else if (finished && !(r.array().job_id() == r.id() && r.array().task_id() >= 0)) {
      // Only launches read the environment; history does not keep it. An
      // array's record that became its last task keeps it for the tasks
      // that may still be requeued.
      stmt = s.delete_env.Fresh();
      sqlite3_bind_int64(stmt, 1, r.id());
      if (sqlite3_step(stmt) != SQLITE_DONE) return fail("dropping a job's environment");
    }
  }
  for (const StateBatch::NodeRow& node : batch.nodes) {
    sqlite3_stmt* stmt = s.upsert_node.Fresh();
    BindText(stmt, 1, node.name);
    sqlite3_bind_int(stmt, 2, node.admin.drain ? 1 : 0);
    BindText(stmt, 3, node.admin.reason);
    sqlite3_bind_int(stmt, 4, node.admin.down ? 1 : 0);
    sqlite3_bind_int64(stmt, 5, node.admin.uid ? static_cast<std::int64_t>(*node.admin.uid) : -1);
    sqlite3_bind_int64(stmt, 6, node.admin.since.count());
    if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing a node");
  }
  if (batch.usage) {
    Statement clear(db_, "DELETE FROM usage");
    Statement insert(db_,
                     "INSERT INTO usage(account, user, usage, as_of_ms, gpu_seconds, cpu_seconds, "
                     "period_start_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    Statement clear_qos(db_, "DELETE FROM qos_usage");
    Statement insert_qos(db_,
                         "INSERT INTO qos_usage(name, gpu_seconds, cpu_seconds, period_start_ms) "
                         "VALUES(?1, ?2, ?3, ?4)");
    if (!clear.Ok() || !insert.Ok() || !clear_qos.Ok() || !insert_qos.Ok()) {
      return fail("preparing the usage update");
    }
    if (sqlite3_step(clear.get()) != SQLITE_DONE || sqlite3_step(clear_qos.get()) != SQLITE_DONE) {
      return fail("clearing usage");
    }
    for (const v1::UsageRecordProto& u : *batch.usage) {
      if (!u.qos().empty()) {
        sqlite3_stmt* stmt = insert_qos.Fresh();
        BindText(stmt, 1, u.qos());
        sqlite3_bind_double(stmt, 2, u.gpu_seconds());
        sqlite3_bind_double(stmt, 3, u.cpu_seconds());
        sqlite3_bind_int64(stmt, 4, u.period_start_ms());
        if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing QOS usage");
        continue;
      }
      sqlite3_stmt* stmt = insert.Fresh();
      BindText(stmt, 1, u.account());
      BindText(stmt, 2, u.user());
      sqlite3_bind_double(stmt, 3, u.usage());
      sqlite3_bind_int64(stmt, 4, u.as_of_ms());
      sqlite3_bind_double(stmt, 5, u.gpu_seconds());
      sqlite3_bind_double(stmt, 6, u.cpu_seconds());
      sqlite3_bind_int64(stmt, 7, u.period_start_ms());
      if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing usage");
    }
  }
  if (batch.reservations) {
    Statement clear(db_, "DELETE FROM reservations");
    Statement insert(db_, "INSERT INTO reservations(name, record) VALUES(?1, ?2)");
    if (!clear.Ok() || !insert.Ok()) return fail("preparing the reservations' update");
    if (sqlite3_step(clear.get()) != SQLITE_DONE) return fail("clearing reservations");
    for (const v1::Reservation& r : *batch.reservations) {
      sqlite3_stmt* stmt = insert.Fresh();
      BindText(stmt, 1, r.name());
      const std::string blob = r.SerializeAsString();
      sqlite3_bind_blob(stmt, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing a reservation");
    }
  }
  if (batch.accounting) {
    Statement put(db_, "INSERT OR REPLACE INTO accounting(id, record) VALUES(1, ?1)");
    if (!put.Ok()) return fail("preparing the accounts' update");
    const std::string blob = batch.accounting->SerializeAsString();
    sqlite3_stmt* stmt = put.Fresh();
    sqlite3_bind_blob(stmt, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing the accounts");
  }
  if (batch.partitions) {
    Statement clear(db_, "DELETE FROM partitions");
    Statement insert(db_,
                     "INSERT INTO partitions(name, state, uid, since_ms) VALUES(?1, ?2, ?3, ?4)");
    if (!clear.Ok() || !insert.Ok()) return fail("preparing the partitions' update");
    if (sqlite3_step(clear.get()) != SQLITE_DONE) return fail("clearing partition states");
    for (const PartitionAdmin& p : *batch.partitions) {
      sqlite3_stmt* stmt = insert.Fresh();
      BindText(stmt, 1, p.name);
      sqlite3_bind_int(stmt, 2, static_cast<int>(p.state));
      sqlite3_bind_int64(stmt, 3, p.uid ? static_cast<std::int64_t>(*p.uid) : -1);
      sqlite3_bind_int64(stmt, 4, p.since.count());
      if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing a partition state");
    }
  }
  if (batch.next_job_id > 0) {
    sqlite3_stmt* stmt = s.set_next_id.Fresh();
    sqlite3_bind_int64(stmt, 1, batch.next_job_id);
    if (sqlite3_step(stmt) != SQLITE_DONE) return fail("writing the next job id");
  }
  if (sqlite3_step(s.commit.Fresh()) != SQLITE_DONE) return fail("committing");
  return absl::OkStatus();
}

namespace {

// One row's blob, parsed as `Message`; nullopt when there is no row.
template <typename Message>
absl::StatusOr<std::optional<Message>> FindOne(
    Statement& statement, std::int64_t id,
    const std::function<absl::Status(std::string_view)>& error, std::string_view what) {
  sqlite3_stmt* stmt = statement.Fresh();
  sqlite3_bind_int64(stmt, 1, id);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return error(fmt::format("reading {}", what));
  Message message;
  bool parsed = message.ParseFromString(ColumnBytes(stmt, 0));
  if constexpr (std::is_same_v<Message, v1::JobRecord>) {
    if (parsed) UpgradeJobRecord(message);
  }
  sqlite3_reset(stmt);
  if (!parsed) return absl::DataLossError(fmt::format("job {}'s {} cannot be read", id, what));
  return message;
}

}  // namespace

absl::StatusOr<std::optional<v1::JobRecord>> SqliteStore::FindJob(std::int64_t id) {
  return FindOne<v1::JobRecord>(
      statements_->find_job, id, [this](std::string_view what) { return Error(what); }, "record");
}

absl::StatusOr<std::optional<v1::JobSpec>> SqliteStore::FindEnvironment(std::int64_t id) {
  return FindOne<v1::JobSpec>(
      statements_->find_env, id, [this](std::string_view what) { return Error(what); },
      "environment");
}

absl::StatusOr<std::vector<v1::JobRecord>> SqliteStore::History(const HistoryQuery& query) {
  std::string sql = "SELECT record FROM jobs WHERE finished = 1";
  auto placeholders = [](std::size_t n) {
    std::string text;
    for (std::size_t i = 0; i < n; ++i) text += i == 0 ? "?" : ", ?";
    return text;
  };
  if (!query.job_ids.empty())
    sql += fmt::format(" AND id IN ({})", placeholders(query.job_ids.size()));
  if (query.uid) sql += " AND uid = ?";
  if (!query.user_name.empty()) sql += " AND user = ?";
  if (!query.account.empty()) sql += " AND account = ?";
  if (!query.states.empty())
    sql += fmt::format(" AND state IN ({})", placeholders(query.states.size()));
  if (query.since_ms > 0) sql += " AND end_ms >= ?";
  if (query.until_ms > 0) sql += " AND end_ms < ?";
  sql +=
      query.newest && query.limit > 0 ? " ORDER BY end_ms DESC, id DESC" : " ORDER BY end_ms, id";
  if (query.limit > 0) sql += " LIMIT ?";
  Statement stmt(db_, sql.c_str());
  if (!stmt.Ok()) return Error("preparing a history query");
  int index = 0;
  sqlite3_stmt* s = stmt.get();
  for (const std::int64_t id : query.job_ids) sqlite3_bind_int64(s, ++index, id);
  if (query.uid) sqlite3_bind_int64(s, ++index, *query.uid);
  if (!query.user_name.empty()) BindText(s, ++index, query.user_name);
  if (!query.account.empty()) BindText(s, ++index, query.account);
  for (const int state : query.states) sqlite3_bind_int(s, ++index, state);
  if (query.since_ms > 0) sqlite3_bind_int64(s, ++index, query.since_ms);
  if (query.until_ms > 0) sqlite3_bind_int64(s, ++index, query.until_ms);
  if (query.limit > 0) sqlite3_bind_int(s, ++index, query.limit);
  std::vector<v1::JobRecord> records;
  int rc = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (!ParseJobRecord(ColumnBytes(s, 0), records.emplace_back())) {
      return absl::DataLossError(fmt::format("a job record in {} cannot be read", path_));
    }
  }
  if (rc != SQLITE_DONE) return Error("reading history");
  if (query.newest && query.limit > 0) std::reverse(records.begin(), records.end());
  return records;
}

absl::StatusOr<int> SqliteStore::PurgeHistory(std::int64_t before_ms, int limit) {
  Statement purge(db_,
                  "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE finished = 1 AND "
                  "end_ms < ?1 ORDER BY end_ms, id LIMIT ?2)");
  if (!purge.Ok()) return Error("preparing the history purge");
  sqlite3_bind_int64(purge.get(), 1, before_ms);
  sqlite3_bind_int(purge.get(), 2, limit);
  if (sqlite3_step(purge.get()) != SQLITE_DONE) return Error("purging history");
  return sqlite3_changes(db_);
}

absl::StatusOr<StateReport> SqliteStore::Check() {
  Statement integrity(db_, "PRAGMA integrity_check");
  if (!integrity.Ok()) return Error("starting the integrity check");
  std::vector<std::string> problems;
  int rc = 0;
  while ((rc = sqlite3_step(integrity.get())) == SQLITE_ROW) {
    const std::string line = reinterpret_cast<const char*>(sqlite3_column_text(integrity.get(), 0));
    if (line != "ok") problems.push_back(line);
  }
  if (rc != SQLITE_DONE) return Error("checking integrity");
  if (!problems.empty()) {
    return absl::DataLossError(fmt::format(
        "state database {} is damaged: {}{}; {}", path_,
        fmt::join(problems.begin(),
                  problems.begin() + std::min<std::ptrdiff_t>(5, std::ssize(problems)), "; "),
        problems.size() > 5 ? "; …" : "", Recovery(path_)));
  }
  absl::StatusOr<LoadedState> loaded = Load();
  if (!loaded.ok()) return loaded.status();
  StateReport report;
  report.schema = kSchemaVersion;
  report.next_job_id = loaded->next_job_id;
  report.active_jobs = static_cast<std::int64_t>(loaded->jobs.size());
  report.nodes = static_cast<std::int64_t>(loaded->nodes.size());
  Statement count(db_, "SELECT count(*) FROM jobs");
  if (!count.Ok() || sqlite3_step(count.get()) != SQLITE_ROW) return Error("counting jobs");
  report.jobs = sqlite3_column_int64(count.get(), 0);
  return report;
}

}  // namespace cohort::controller
