// SPDX-License-Identifier: Apache-2.0
// The controller's state database: round trips, history, purge, and every
// way a database can be refused (damaged, foreign, newer schema), and the
// migration from each older schema.
#include "store/store.h"
#include "controller/store_conformance.h"
#include "controller/store_rows.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace cohort::controller {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cohort-store-test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> Open(Store::Mode mode = Store::Mode::kWrite) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_, mode, StateSync::kOff);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  static StateBatch::JobRow Row(std::int64_t id, v1::JobState state, std::int64_t end_ms = 0,
                                const std::string& user = "alice") {
    return testing::JobRow(id, state, end_ms, user);
  }

  // Writes raw SQL with the SQLite library, as another program would.
  void RawSql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  std::string dir_;
  std::string path_;
};

// What every backend does alike (store_conformance.h).
TEST_F(StoreTest, RecordsLoadBack) {
  testing::conformance::RecordsLoadBack([&](Store::Mode mode) { return Open(mode); });
}
TEST_F(StoreTest, HistoryFiltersAndPurge) {
  testing::conformance::HistoryFiltersAndPurge([&](Store::Mode mode) { return Open(mode); });
}
TEST_F(StoreTest, NextIdNeverFallsBelowAStoredJob) {
  testing::conformance::NextIdNeverFallsBelowAStoredJob(
      [&](Store::Mode mode) { return Open(mode); });
}

TEST_F(StoreTest, CheckpointsHandedOffAreMadeByAnotherConnection) {
  std::unique_ptr<Store> writer = Open();
  std::unique_ptr<Store> checkpointer = Open();
  int due = 0;
  writer->HandOffCheckpoints(4, [&] { ++due; });
  const auto size = [&](const std::string& file) {
    return std::filesystem::file_size(path_ + file);
  };
  const std::uintmax_t database_before = size("");
  // Enough to pass 4 pages of log many times over: SQLite's own checkpoint
  // (every 1,000 pages) would never come, and the writer makes none.
  for (std::int64_t id = 1; id <= 500; ++id) {
    StateBatch batch;
    batch.jobs = {Row(id, v1::JOB_PENDING)};
    batch.jobs[0].record.mutable_spec()->add_argv(std::string(4000, 'x'));
    ASSERT_TRUE(writer->Commit(batch).ok());
  }
  EXPECT_GT(due, 0);
  EXPECT_EQ(size(""), database_before);  // everything is still in the log
  ASSERT_TRUE(checkpointer->Checkpoint().ok());
  EXPECT_GT(size(""), database_before);  // copied into the database
  writer.reset();
  checkpointer.reset();
  absl::StatusOr<LoadedState> loaded = Open()->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->jobs.size(), 500U);
}

TEST_F(StoreTest, MigratesEveryOlderSchema) {
  // Build a database at each older version by running only its migrations,
  // with a job in it, and open it with this build.
  for (int version = 1; version < kSchemaVersion; ++version) {
    std::filesystem::remove(path_);
    std::string sql;
    for (int v = 0; v < version; ++v) sql += Store::Migrations()[static_cast<std::size_t>(v)];
    sql += "PRAGMA user_version = " + std::to_string(version) + ";";
    sql += "PRAGMA application_id = 1128813140;";
    v1::JobRecord record = Row(9, v1::JOB_PENDING).record;
    sql += "INSERT INTO jobs VALUES(9, 1, 0, 1000, 'alice', 'alice', 'gpu', 9000, 0, x'";
    for (const unsigned char c : record.SerializeAsString()) {
      static const char* kHex = "0123456789abcdef";
      sql += kHex[c >> 4];
      sql += kHex[c & 15];
    }
    sql += "');";
    RawSql(sql);
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr) << "from version " << version;
    absl::StatusOr<LoadedState> loaded = store->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ(loaded->jobs.size(), 1U);
    EXPECT_EQ(loaded->jobs[0].id(), 9);
    StateBatch batch;
    batch.nodes = {{"node01", NodeAdmin{}}};
    batch.next_job_id = 10;
    batch.partitions = std::vector<PartitionAdmin>{};
    EXPECT_TRUE(store->Commit(batch).ok());
  }
}

TEST_F(StoreTest, RefusesANewerSchema) {
  Open();
  RawSql("PRAGMA user_version = 99;");
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(path_, Store::Mode::kWrite, StateSync::kOff);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      store.status().message().find("schema version 99, newer than this cohort-controller knows"),
      std::string::npos)
      << store.status();
}

TEST_F(StoreTest, RefusesAForeignDatabase) {
  RawSql("CREATE TABLE photos(id INTEGER);");
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(path_, Store::Mode::kWrite, StateSync::kOff);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not Cohort's state"), std::string::npos)
      << store.status();
}

TEST_F(StoreTest, RefusesADamagedFileAndSaysHowToRecover) {
  {
    std::ofstream(path_) << "this is not a database, just text that is long enough to look like one"
                         << std::string(4096, 'x');
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(path_, Store::Mode::kWrite, StateSync::kOff);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("is damaged"), std::string::npos) << store.status();
  EXPECT_NE(store.status().message().find("--check-state"), std::string::npos) << store.status();
}

TEST_F(StoreTest, TruncatedDatabaseIsRefusedOrFailsItsCheck) {
  {
    std::unique_ptr<Store> store = Open();
    StateBatch batch;
    for (int id = 1; id <= 300; ++id) batch.jobs.push_back(Row(id, v1::JOB_PENDING));
    ASSERT_TRUE(store->Commit(batch).ok());
    // Closing checkpoints the WAL into the file.
  }
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(path_, Store::Mode::kWrite, StateSync::kOff);
  absl::Status result = store.status();
  if (store.ok()) {
    absl::StatusOr<LoadedState> loaded = (*store)->Load();
    result = loaded.status();
    if (result.ok()) result = (*store)->Check().status();
  }
  ASSERT_FALSE(result.ok()) << "half a database was accepted";
  EXPECT_NE(result.message().find("damaged"), std::string::npos) << result;
}

TEST_F(StoreTest, CheckSummarisesASoundDatabase) {
  std::unique_ptr<Store> store = Open();
  StateBatch batch;
  batch.jobs = {Row(1, v1::JOB_PENDING), Row(2, v1::JOB_COMPLETED, 10)};
  batch.next_job_id = 3;
  ASSERT_TRUE(store->Commit(batch).ok());
  absl::StatusOr<StateReport> report = Open(Store::Mode::kRead)->Check();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 2);
  EXPECT_EQ(report->active_jobs, 1);
  EXPECT_EQ(report->next_job_id, 3);
  EXPECT_EQ(report->schema, kSchemaVersion);
}

}  // namespace
}  // namespace cohort::controller
