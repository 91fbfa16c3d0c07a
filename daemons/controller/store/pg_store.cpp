// SPDX-License-Identifier: Apache-2.0
#include "store/pg_store.h"

#include <algorithm>
#include <type_traits>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "cohort/check.h"
#include "store/job_record.h"
#include "store/pg_conn.h"

namespace cohort::controller {
namespace {

using pg::Bytes;
using pg::Number;
using pg::Param;
using pg::Text;

// Taken while migrating: two controllers starting at once migrate in turn.
constexpr long long kMigrationLock = 0x43485254'0001;
// Statements queued before their answers are read: a pipeline that only
// writes would fill both sockets' buffers and stall.
constexpr int kPipelineWindow = 256;

constexpr const char* kUpsertJob =
    "INSERT INTO cohort.jobs(id, state, state_name, finished, name, uid, user_name, account, "
    "partition, qos, nodes, gpus_per_node, exit_code, submit_ms, start_ms, end_ms, record) "
    "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
    "ON CONFLICT(id) DO UPDATE SET state = EXCLUDED.state, state_name = EXCLUDED.state_name, "
    "finished = EXCLUDED.finished, account = EXCLUDED.account, partition = EXCLUDED.partition, "
    "qos = EXCLUDED.qos, nodes = EXCLUDED.nodes, exit_code = EXCLUDED.exit_code, "
    "start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, record = EXCLUDED.record";

// A text column's value: PostgreSQL refuses what is not UTF-8 (and a NUL
// would end the value), and one refused row would fail the whole commit.
// The record (bytea) keeps the exact bytes; the readable column gets '?'
// for each byte that breaks the encoding.
Param Utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = byte < 0x80           ? 1
                         : (byte >> 5) == 0x6  ? 2
                         : (byte >> 4) == 0xe  ? 3
                         : (byte >> 3) == 0x1e ? 4
                                               : 0;
    for (std::size_t k = 1; k < length; ++k) {
      if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) length = 0;
    }
    if (length == 0 || byte == 0) {
      out += '?';
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return Text(std::move(out));
}

std::string StateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  if (name.starts_with("JOB_")) name.erase(0, 4);
  return name;
}

// A transaction sent as one pipeline: every statement goes out at once and
// the answers are read after, in windows; the first error is kept.
class Pipeline {
 public:
  explicit Pipeline(pg::Connection& conn) : conn_(conn) {
    if (PQenterPipelineMode(conn_.get()) == 0) failed_ = conn_.Error(nullptr, "starting a commit");
  }
  void Send(const char* statement, const std::vector<Param>& params, std::string_view what) {
    if (!failed_.ok()) return;
    const pg::ParamArrays arrays(params);
    if (PQsendQueryPrepared(conn_.get(), statement, arrays.Count(), arrays.values.data(),
                            arrays.lengths.data(), arrays.formats.data(), 0) == 0) {
      failed_ = conn_.Error(nullptr, what);
      return;
    }
    whats_.emplace_back(what);
    if (whats_.size() - read_ >= kPipelineWindow) {
      PQsendFlushRequest(conn_.get());
      ReadUpTo(whats_.size());
    }
  }
  // Ends the pipeline; the first error of any statement, or OK.
  absl::Status Finish() {
    if (PQpipelineSync(conn_.get()) == 0 && failed_.ok())
      failed_ = conn_.Error(nullptr, "committing");
    ReadUpTo(whats_.size());
    // The synchronization point's own result.
    for (;;) {
      pg::Result result(PQgetResult(conn_.get()));
      if (result == nullptr) {
        if (failed_.ok()) failed_ = conn_.Error(nullptr, "committing");
        break;
      }
      if (PQresultStatus(result.get()) == PGRES_PIPELINE_SYNC) break;
    }
    PQexitPipelineMode(conn_.get());
    if (!failed_.ok() && PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
      pg::Result rollback(PQexec(conn_.get(), "ROLLBACK"));
    }
    return failed_;
  }

 private:
  void ReadUpTo(std::size_t count) {
    while (read_ < count) {
      // One statement's results end with a null.
      while (PGresult* raw = PQgetResult(conn_.get())) {
        const pg::Result result(raw);
        const ExecStatusType status = PQresultStatus(raw);
        if (failed_.ok() && status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
          failed_ = conn_.Error(raw, whats_[read_]);
        }
      }
      if (PQstatus(conn_.get()) != CONNECTION_OK) {
        if (failed_.ok()) failed_ = conn_.Error(nullptr, whats_[read_]);
        read_ = count;
        return;
      }
      ++read_;
    }
  }

  pg::Connection& conn_;
  absl::Status failed_;
  std::vector<std::string> whats_;
  std::size_t read_ = 0;
};

class PgStore final : public Store {
 public:
  PgStore(std::unique_ptr<pg::Connection> conn, std::int64_t epoch)
      : conn_(std::move(conn)), epoch_(epoch) {}

  absl::Status Migrate();
  absl::Status CheckVersion();
  absl::Status PrepareAll(StateSync sync);

  absl::StatusOr<LoadedState> Load() override;
  absl::Status Commit(const StateBatch& batch) override;
  absl::StatusOr<std::optional<v1::JobRecord>> FindJob(std::int64_t id) override;
  absl::StatusOr<std::optional<v1::JobSpec>> FindEnvironment(std::int64_t id) override;
  absl::StatusOr<std::vector<v1::JobRecord>> History(const HistoryQuery& query) override;
  absl::StatusOr<int> PurgeHistory(std::int64_t before_ms, int limit) override;
  absl::StatusOr<StateReport> Check() override;

 private:
  absl::StatusOr<int> Version();
  template <typename Message>
  absl::StatusOr<std::optional<Message>> FindOne(const char* sql, std::int64_t id,
                                                 std::string_view what);
  absl::Status Unreadable(std::string_view what) const {
    return absl::DataLossError(
        fmt::format("state database {}: {} cannot be read; restore the database from its backup "
                    "(docs/operations.md)",
                    conn_->Where(), what));
  }

  std::unique_ptr<pg::Connection> conn_;
  std::int64_t epoch_ = 0;
};

absl::StatusOr<int> PgStore::Version() {
  absl::StatusOr<pg::Result> exists = conn_->Exec(
      "SELECT to_regclass('cohort.schema_version') IS NOT NULL", {}, "reading the schema version");
  if (!exists.ok()) return exists.status();
  if (pg::Value(exists->get(), 0, 0) != "t") return 0;
  absl::StatusOr<pg::Result> version =
      conn_->Exec("SELECT coalesce(max(version), 0) FROM cohort.schema_version", {},
                  "reading the schema version");
  if (!version.ok()) return version.status();
  return static_cast<int>(pg::IntValue(version->get(), 0, 0));
}

absl::Status PgStore::Migrate() {
  if (absl::StatusOr<pg::Result> begin =
          conn_->Exec(fmt::format("BEGIN; SELECT pg_advisory_xact_lock({})", kMigrationLock), {},
                      "locking the schema to migrate it");
      !begin.ok()) {
    return begin.status();
  }
  absl::Status status = absl::OkStatus();
  absl::StatusOr<int> found = Version();
  if (!found.ok()) {
    status = found.status();
  } else if (*found > kPgSchemaVersion) {
    status = absl::FailedPreconditionError(fmt::format(
        "state database {} has schema version {}, newer than this cohort-controller knows ({}); "
        "run the newer controller (docs/operations.md)",
        conn_->Where(), *found, kPgSchemaVersion));
  }
  for (int version = found.ok() ? *found : kPgSchemaVersion;
       status.ok() && version < kPgSchemaVersion; ++version) {
    absl::StatusOr<pg::Result> step = conn_->Exec(
        fmt::format("{}\nINSERT INTO cohort.schema_version(version) VALUES({});",
                    PostgresMigrations()[static_cast<std::size_t>(version)], version + 1),
        {}, fmt::format("migrating the state to schema version {}", version + 1));
    if (!step.ok()) status = step.status();
  }
  absl::StatusOr<pg::Result> end =
      conn_->Exec(status.ok() ? "COMMIT" : "ROLLBACK", {}, "migrating");
  if (status.ok() && !end.ok()) status = end.status();
  return status;
}

absl::Status PgStore::CheckVersion() {
  absl::StatusOr<int> found = Version();
  if (!found.ok()) return found.status();
  if (*found != kPgSchemaVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "state database {} has schema version {}, this cohort-controller writes {}; start the "
        "controller of that version once to migrate it",
        conn_->Where(), *found, kPgSchemaVersion));
  }
  return absl::OkStatus();
}

absl::Status PgStore::PrepareAll(StateSync sync) {
  // synchronous_commit=off answers before the server's WAL reaches its
  // disk: a crash of the database server (not of a controller) may lose
  // the last fraction of a second.
  if (absl::StatusOr<pg::Result> set = conn_->Exec(
          sync == StateSync::kFull ? "SET synchronous_commit = on" : "SET synchronous_commit = off",
          {}, "setting synchronous_commit");
      !set.ok()) {
    return set.status();
  }
  for (const auto& [name, sql] : std::initializer_list<std::pair<const char*, const char*>>{
           {"begin", "BEGIN"},
           {"commit", "COMMIT"},
           {"fence", "SELECT cohort.fence($1)"},
           {"upsert_job", kUpsertJob},
           {"insert_env",
            "INSERT INTO cohort.job_env(id, spec) VALUES($1, $2) ON CONFLICT(id) DO UPDATE SET "
            "spec = EXCLUDED.spec"},
           {"delete_env", "DELETE FROM cohort.job_env WHERE id = $1"},
           {"upsert_node",
            "INSERT INTO cohort.nodes(name, drain, reason, down, uid, since_ms) "
            "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(name) DO UPDATE SET drain = "
            "EXCLUDED.drain, reason = EXCLUDED.reason, down = EXCLUDED.down, uid = EXCLUDED.uid, "
            "since_ms = EXCLUDED.since_ms"},
           {"clear_usage", "DELETE FROM cohort.usage"},
           {"clear_qos_usage", "DELETE FROM cohort.qos_usage"},
           {"insert_qos_usage",
            "INSERT INTO cohort.qos_usage(name, gpu_seconds, cpu_seconds, period_start_ms) "
            "VALUES($1, $2, $3, $4)"},
           {"clear_partitions", "DELETE FROM cohort.partitions"},
           {"insert_partition",
            "INSERT INTO cohort.partitions(name, state, uid, since_ms) VALUES($1, $2, $3, $4)"},
           {"insert_usage",
            "INSERT INTO cohort.usage(account, user_name, usage, as_of_ms, gpu_seconds, "
            "cpu_seconds, period_start_ms) VALUES($1, $2, $3, $4, $5, $6, $7)"},
           {"clear_reservations", "DELETE FROM cohort.reservations"},
           {"insert_reservation", "INSERT INTO cohort.reservations(name, record) VALUES($1, $2)"},
           {"put_accounting",
            "INSERT INTO cohort.accounting(id, record) VALUES(1, $1) ON CONFLICT(id) DO UPDATE "
            "SET record = EXCLUDED.record"},
           {"set_next_id",
            "INSERT INTO cohort.meta(key, value) VALUES('next_job_id', $1) ON CONFLICT(key) DO "
            "UPDATE SET value = EXCLUDED.value"},
       }) {
    if (absl::Status s = conn_->Prepare(name, sql); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedState> PgStore::Load() {
  LoadedState state;
  state.schema_before = kPgSchemaVersion;
  absl::StatusOr<pg::Result> jobs = conn_->Exec(
      "SELECT record FROM cohort.jobs WHERE NOT finished ORDER BY id", {}, "loading jobs", true);
  if (!jobs.ok()) return jobs.status();
  for (int row = 0; row < PQntuples(jobs->get()); ++row) {
    const std::string_view bytes = pg::Value(jobs->get(), row, 0);
    if (!ParseJobRecord(bytes, state.jobs.emplace_back())) {
      return Unreadable("a job record");
    }
  }
  absl::StatusOr<pg::Result> next = conn_->Exec(
      "SELECT greatest((SELECT value FROM cohort.meta WHERE key = 'next_job_id'), "
      "(SELECT coalesce(max(id), 0) + 1 FROM cohort.jobs), 1)",
      {}, "loading the next job id");
  if (!next.ok()) return next.status();
  state.next_job_id = pg::IntValue(next->get(), 0, 0);
  absl::StatusOr<pg::Result> nodes =
      conn_->Exec("SELECT name, drain, reason, down, uid, since_ms FROM cohort.nodes ORDER BY name",
                  {}, "loading node settings");
  if (!nodes.ok()) return nodes.status();
  for (int row = 0; row < PQntuples(nodes->get()); ++row) {
    StateBatch::NodeRow& loaded = state.nodes.emplace_back();
    loaded.name = pg::Value(nodes->get(), row, 0);
    loaded.admin.drain = pg::Value(nodes->get(), row, 1) == "t";
    loaded.admin.reason = pg::Value(nodes->get(), row, 2);
    loaded.admin.down = pg::Value(nodes->get(), row, 3) == "t";
    if (const std::int64_t uid = pg::IntValue(nodes->get(), row, 4); uid >= 0) {
      loaded.admin.uid = static_cast<std::uint32_t>(uid);
    }
    loaded.admin.since = Millis(pg::IntValue(nodes->get(), row, 5));
  }
  absl::StatusOr<pg::Result> usage = conn_->Exec(
      "SELECT account, user_name, usage, as_of_ms, gpu_seconds, cpu_seconds, period_start_ms "
      "FROM cohort.usage ORDER BY account, user_name",
      {}, "loading fair-share usage");
  if (!usage.ok()) return usage.status();
  for (int row = 0; row < PQntuples(usage->get()); ++row) {
    v1::UsageRecordProto& u = state.usage.emplace_back();
    u.set_account(std::string(pg::Value(usage->get(), row, 0)));
    u.set_user(std::string(pg::Value(usage->get(), row, 1)));
    u.set_usage(std::stod(std::string(pg::Value(usage->get(), row, 2))));
    u.set_as_of_ms(pg::IntValue(usage->get(), row, 3));
    u.set_gpu_seconds(std::stod(std::string(pg::Value(usage->get(), row, 4))));
    u.set_cpu_seconds(std::stod(std::string(pg::Value(usage->get(), row, 5))));
    u.set_period_start_ms(pg::IntValue(usage->get(), row, 6));
  }
  absl::StatusOr<pg::Result> qos_usage =
      conn_->Exec("SELECT name, gpu_seconds, cpu_seconds, period_start_ms FROM cohort.qos_usage",
                  {}, "loading QOS usage");
  if (!qos_usage.ok()) return qos_usage.status();
  for (int row = 0; row < PQntuples(qos_usage->get()); ++row) {
    v1::UsageRecordProto& u = state.usage.emplace_back();
    u.set_qos(std::string(pg::Value(qos_usage->get(), row, 0)));
    u.set_gpu_seconds(std::stod(std::string(pg::Value(qos_usage->get(), row, 1))));
    u.set_cpu_seconds(std::stod(std::string(pg::Value(qos_usage->get(), row, 2))));
    u.set_period_start_ms(pg::IntValue(qos_usage->get(), row, 3));
  }
  absl::StatusOr<pg::Result> accounting = conn_->Exec(
      "SELECT record FROM cohort.accounting WHERE id = 1", {}, "loading the accounts", true);
  if (!accounting.ok()) return accounting.status();
  if (PQntuples(accounting->get()) > 0) {
    const std::string_view bytes = pg::Value(accounting->get(), 0, 0);
    if (!state.accounting.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return Unreadable("the accounts sacctmgr made");
    }
  }
  absl::StatusOr<pg::Result> reservations = conn_->Exec(
      "SELECT record FROM cohort.reservations ORDER BY name", {}, "loading reservations", true);
  if (!reservations.ok()) return reservations.status();
  for (int row = 0; row < PQntuples(reservations->get()); ++row) {
    const std::string_view bytes = pg::Value(reservations->get(), row, 0);
    if (!state.reservations.emplace_back().ParseFromArray(bytes.data(),
                                                          static_cast<int>(bytes.size()))) {
      return Unreadable("a reservation");
    }
  }
  absl::StatusOr<pg::Result> partitions =
      conn_->Exec("SELECT name, state, uid, since_ms FROM cohort.partitions ORDER BY name", {},
                  "loading partition states");
  if (!partitions.ok()) return partitions.status();
  for (int row = 0; row < PQntuples(partitions->get()); ++row) {
    std::optional<PartitionAdmin> loaded = PartitionRow(
        std::string(pg::Value(partitions->get(), row, 0)), pg::IntValue(partitions->get(), row, 1),
        pg::IntValue(partitions->get(), row, 2), pg::IntValue(partitions->get(), row, 3));
    if (loaded) state.partitions.push_back(*std::move(loaded));
  }
  return state;
}

absl::Status PgStore::Commit(const StateBatch& batch) {
  Pipeline pipeline(*conn_);
  pipeline.Send("begin", {}, "beginning a transaction");
  if (epoch_ > 0) pipeline.Send("fence", {Number(epoch_)}, "checking this controller's lease");
  std::string bytes;
  for (const StateBatch::JobRow& row : batch.jobs) {
    const v1::JobRecord& r = row.record;
    const bool finished = IsFinishedRecord(r);
    bytes.clear();
    r.SerializeToString(&bytes);
    pipeline.Send("upsert_job",
                  {Number(r.id()), Number(r.state()), Text(StateName(r.state())),
                   Text(finished ? "true" : "false"), Utf8(r.spec().name()), Number(r.uid()),
                   Utf8(r.user_name()), Utf8(r.account()), Utf8(r.partition()), Utf8(r.qos()),
                   Number(r.spec().nodes()), Number(r.spec().gpus_per_node()),
                   Number(r.run().exit_code()), Number(r.submit_time_ms()),
                   Number(r.run().start_time_ms()), Number(r.run().end_time_ms()), Bytes(bytes)},
                  "writing a job");
    if (row.env && !finished) {
      pipeline.Send("insert_env", {Number(r.id()), Bytes(*row.env)}, "writing a job's environment");
    } else if (finished && !(r.array().job_id() == r.id() && r.array().task_id() >= 0)) {
      // As SQLite's store: history keeps no environment, but an array's
      // record that became its last task keeps it for requeued tasks.
      pipeline.Send("delete_env", {Number(r.id())}, "dropping a job's environment");
    }
  }
  for (const StateBatch::NodeRow& node : batch.nodes) {
    pipeline.Send("upsert_node",
                  {Utf8(node.name), Text(node.admin.drain ? "true" : "false"),
                   Utf8(node.admin.reason), Text(node.admin.down ? "true" : "false"),
                   Number(node.admin.uid ? static_cast<std::int64_t>(*node.admin.uid) : -1),
                   Number(node.admin.since.count())},
                  "writing a node");
  }
  if (batch.usage) {
    pipeline.Send("clear_usage", {}, "clearing usage");
    pipeline.Send("clear_qos_usage", {}, "clearing QOS usage");
    for (const v1::UsageRecordProto& u : *batch.usage) {
      if (!u.qos().empty()) {
        pipeline.Send("insert_qos_usage",
                      {Utf8(u.qos()), Text(fmt::format("{}", u.gpu_seconds())),
                       Text(fmt::format("{}", u.cpu_seconds())), Number(u.period_start_ms())},
                      "writing QOS usage");
        continue;
      }
      pipeline.Send("insert_usage",
                    {Utf8(u.account()), Utf8(u.user()), Text(fmt::format("{}", u.usage())),
                     Number(u.as_of_ms()), Text(fmt::format("{}", u.gpu_seconds())),
                     Text(fmt::format("{}", u.cpu_seconds())), Number(u.period_start_ms())},
                    "writing usage");
    }
  }
  if (batch.reservations) {
    pipeline.Send("clear_reservations", {}, "clearing reservations");
    for (const v1::Reservation& r : *batch.reservations) {
      pipeline.Send("insert_reservation", {Utf8(r.name()), Bytes(r.SerializeAsString())},
                    "writing a reservation");
    }
  }
  if (batch.accounting) {
    pipeline.Send("put_accounting", {Bytes(batch.accounting->SerializeAsString())},
                  "writing the accounts");
  }
  if (batch.partitions) {
    pipeline.Send("clear_partitions", {}, "clearing partition states");
    for (const PartitionAdmin& p : *batch.partitions) {
      pipeline.Send(
          "insert_partition",
          {Utf8(p.name), Number(static_cast<std::int64_t>(p.state)),
           Number(p.uid ? static_cast<std::int64_t>(*p.uid) : -1), Number(p.since.count())},
          "writing a partition state");
    }
  }
  if (batch.next_job_id > 0) {
    pipeline.Send("set_next_id", {Number(batch.next_job_id)}, "writing the next job id");
  }
  pipeline.Send("commit", {}, "committing");
  return pipeline.Finish();
}

template <typename Message>
absl::StatusOr<std::optional<Message>> PgStore::FindOne(const char* sql, std::int64_t id,
                                                        std::string_view what) {
  absl::StatusOr<pg::Result> found =
      conn_->Exec(sql, {Number(id)}, fmt::format("reading job {}'s {}", id, what), true);
  if (!found.ok()) return found.status();
  if (PQntuples(found->get()) == 0) return std::nullopt;
  Message message;
  const std::string_view bytes = pg::Value(found->get(), 0, 0);
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Unreadable(fmt::format("job {}'s {}", id, what));
  }
  if constexpr (std::is_same_v<Message, v1::JobRecord>) UpgradeJobRecord(message);
  return message;
}

absl::StatusOr<std::optional<v1::JobRecord>> PgStore::FindJob(std::int64_t id) {
  return FindOne<v1::JobRecord>("SELECT record FROM cohort.jobs WHERE id = $1", id, "record");
}

absl::StatusOr<std::optional<v1::JobSpec>> PgStore::FindEnvironment(std::int64_t id) {
  return FindOne<v1::JobSpec>("SELECT spec FROM cohort.job_env WHERE id = $1", id, "environment");
}

absl::StatusOr<std::vector<v1::JobRecord>> PgStore::History(const HistoryQuery& query) {
  std::string sql = "SELECT record FROM cohort.jobs WHERE finished";
  std::vector<Param> params;
  const auto next = [&](Param p) {
    params.push_back(std::move(p));
    return fmt::format("${}", params.size());
  };
  const auto list = [&](const auto& values) {
    std::string text;
    for (const auto value : values) text += (text.empty() ? "" : ", ") + next(Number(value));
    return text;
  };
  if (!query.job_ids.empty()) sql += fmt::format(" AND id IN ({})", list(query.job_ids));
  if (query.uid) sql += " AND uid = " + next(Number(*query.uid));
  if (!query.user_name.empty()) sql += " AND user_name = " + next(Text(query.user_name));
  if (!query.account.empty()) sql += " AND account = " + next(Text(query.account));
  if (!query.states.empty()) sql += fmt::format(" AND state IN ({})", list(query.states));
  if (query.since_ms > 0) sql += " AND end_ms >= " + next(Number(query.since_ms));
  if (query.until_ms > 0) sql += " AND end_ms < " + next(Number(query.until_ms));
  sql +=
      query.newest && query.limit > 0 ? " ORDER BY end_ms DESC, id DESC" : " ORDER BY end_ms, id";
  if (query.limit > 0) sql += " LIMIT " + next(Number(query.limit));
  absl::StatusOr<pg::Result> rows = conn_->Exec(sql, params, "reading history", true);
  if (!rows.ok()) return rows.status();
  std::vector<v1::JobRecord> records;
  for (int row = 0; row < PQntuples(rows->get()); ++row) {
    const std::string_view bytes = pg::Value(rows->get(), row, 0);
    if (!ParseJobRecord(bytes, records.emplace_back())) {
      return Unreadable("a job record");
    }
  }
  if (query.newest && query.limit > 0) std::reverse(records.begin(), records.end());
  return records;
}

absl::StatusOr<int> PgStore::PurgeHistory(std::int64_t before_ms, int limit) {
  absl::StatusOr<pg::Result> purged = conn_->Exec(
      "DELETE FROM cohort.jobs WHERE id IN (SELECT id FROM cohort.jobs WHERE finished AND end_ms "
      "< $1 ORDER BY end_ms, id LIMIT $2)",
      {Number(before_ms), Number(limit)}, "purging history");
  if (!purged.ok()) return purged.status();
  return static_cast<int>(std::strtol(PQcmdTuples(purged->get()), nullptr, 10));
}

absl::StatusOr<StateReport> PgStore::Check() {
  // PostgreSQL checks its own pages (and its checksums, when initdb turned
  // them on); what is Cohort's to check is that every record reads.
  absl::StatusOr<LoadedState> loaded = Load();
  if (!loaded.ok()) return loaded.status();
  absl::StatusOr<pg::Result> count =
      conn_->Exec("SELECT count(*) FROM cohort.jobs", {}, "counting jobs");
  if (!count.ok()) return count.status();
  StateReport report;
  report.schema = kPgSchemaVersion;
  report.next_job_id = loaded->next_job_id;
  report.active_jobs = static_cast<std::int64_t>(loaded->jobs.size());
  report.nodes = static_cast<std::int64_t>(loaded->nodes.size());
  report.jobs = pg::IntValue(count->get(), 0, 0);
  return report;
}

}  // namespace

const std::vector<std::string>& PostgresMigrations() {
  // Entry i takes the schema from version i to i + 1. Append only.
  static const std::vector<std::string> migrations = {
      // 1: everything SQLite's version 3 holds, readable columns for
      // operators' SQL, and the lease that makes one controller active.
      R"sql(
CREATE SCHEMA IF NOT EXISTS cohort;
CREATE TABLE cohort.schema_version(version integer PRIMARY KEY);
CREATE TABLE cohort.meta(key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE cohort.jobs(
  id bigint PRIMARY KEY,
  state smallint NOT NULL,
  state_name text NOT NULL,
  finished boolean NOT NULL,
  name text NOT NULL,
  uid bigint NOT NULL,
  user_name text NOT NULL,
  account text NOT NULL,
  partition text NOT NULL,
  qos text NOT NULL,
  nodes integer NOT NULL,
  gpus_per_node integer NOT NULL,
  exit_code integer NOT NULL,
  submit_ms bigint NOT NULL,
  start_ms bigint NOT NULL,
  end_ms bigint NOT NULL,
  submit_time timestamptz GENERATED ALWAYS AS (to_timestamp(submit_ms / 1000.0)) STORED,
  start_time timestamptz GENERATED ALWAYS AS
    (CASE WHEN start_ms > 0 THEN to_timestamp(start_ms / 1000.0) END) STORED,
  end_time timestamptz GENERATED ALWAYS AS
    (CASE WHEN end_ms > 0 THEN to_timestamp(end_ms / 1000.0) END) STORED,
  record bytea NOT NULL);
CREATE INDEX jobs_active ON cohort.jobs(id) WHERE NOT finished;
CREATE INDEX jobs_ended ON cohort.jobs(end_ms) WHERE finished;
CREATE INDEX jobs_user ON cohort.jobs(user_name, end_ms);
CREATE TABLE cohort.job_env(id bigint PRIMARY KEY, spec bytea NOT NULL);
CREATE TABLE cohort.nodes(name text PRIMARY KEY, drain boolean NOT NULL, reason text NOT NULL);
CREATE TABLE cohort.usage(account text NOT NULL, user_name text NOT NULL,
  usage double precision NOT NULL, as_of_ms bigint NOT NULL, PRIMARY KEY(account, user_name));
CREATE TABLE cohort.leader(
  id integer PRIMARY KEY CHECK (id = 1),
  epoch bigint NOT NULL,
  holder text NOT NULL,
  address text NOT NULL,
  backend_pid integer NOT NULL,
  expires_at timestamptz NOT NULL,
  since timestamptz NOT NULL);
INSERT INTO cohort.leader VALUES(1, 0, '', '', 0, '-infinity', now());
CREATE FUNCTION cohort.fence(expected bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  current bigint;
BEGIN
  SELECT epoch INTO current FROM cohort.leader WHERE id = 1 FOR SHARE;
  IF current IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'fenced: another controller took over (lease epoch % after %)', current, expected
      USING ERRCODE = 'CF001';
  END IF;
END
$$;
)sql",
      // 2: job records keep the engine job's groups in messages of their
      // own (as SQLite's version 4); the columns are unchanged.
      R"sql(
COMMENT ON COLUMN cohort.jobs.record IS
  'cohort.v1.JobRecord, its groups in messages of their own (schema version 2)';
)sql",
      // 3: a node set DOWN by an operator, and who set a node's state and
      // when (as SQLite's version 5).
      R"sql(
ALTER TABLE cohort.nodes ADD COLUMN down boolean NOT NULL DEFAULT false,
  ADD COLUMN uid bigint NOT NULL DEFAULT -1, ADD COLUMN since_ms bigint NOT NULL DEFAULT 0;
CREATE TABLE cohort.partitions(name text PRIMARY KEY, state smallint NOT NULL,
  uid bigint NOT NULL, since_ms bigint NOT NULL);
)sql",
      // 4: budgets' undecayed use per usage period, and what sacctmgr made
      // (as SQLite's version 6).
      R"sql(
ALTER TABLE cohort.usage ADD COLUMN gpu_seconds double precision NOT NULL DEFAULT 0,
  ADD COLUMN cpu_seconds double precision NOT NULL DEFAULT 0,
  ADD COLUMN period_start_ms bigint NOT NULL DEFAULT 0;
CREATE TABLE cohort.accounting(id integer PRIMARY KEY CHECK (id = 1), record bytea NOT NULL);
)sql",
      // 5: operators' reservations (as SQLite's version 7).
      R"sql(
CREATE TABLE cohort.reservations(name text PRIMARY KEY, record bytea NOT NULL);
)sql",
      // 6: each QOS's use this usage period (as SQLite's version 8).
      R"sql(
CREATE TABLE cohort.qos_usage(name text PRIMARY KEY, gpu_seconds double precision NOT NULL,
  cpu_seconds double precision NOT NULL, period_start_ms bigint NOT NULL);
)sql",
  };
  COHORT_CHECK(static_cast<int>(migrations.size()) == kPgSchemaVersion,
               "one migration per version");
  return migrations;
}

absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                         Store::Mode mode, StateSync sync,
                                                         std::int64_t epoch) {
  absl::StatusOr<std::unique_ptr<pg::Connection>> conn =
      pg::Connection::Open(conninfo, std::chrono::seconds(10));
  if (!conn.ok()) return conn.status();
  auto store = std::make_unique<PgStore>(*std::move(conn), epoch);
  if (absl::Status s = mode == Store::Mode::kWrite ? store->Migrate() : store->CheckVersion();
      !s.ok()) {
    return s;
  }
  if (absl::Status s = store->PrepareAll(sync); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace cohort::controller
