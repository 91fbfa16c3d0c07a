// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL state backend against a real PostgreSQL 15 server
// (scripts/pg_server.sh, one per test program): the same round trips and
// history as SQLite's (store_conformance.h), the lease, and fencing: once another controller took
// the lease, nothing the old one commits lands.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "controller/store_conformance.h"
#include "controller/store_rows.h"
#include "store/pg_conn.h"
#include "store/pg_leader.h"
#include "store/pg_store.h"

namespace cohort::controller {
namespace {

class PgStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/cohort-pg-test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = new std::string(pattern);
    const std::string out = *dir_ + ".conninfo";
    const std::string command =
        fmt::format("bash {} start {} fsync=off >{}", COHORT_PG_SERVER, *dir_, out);
    ASSERT_EQ(std::system(command.c_str()), 0) << "PostgreSQL did not start: " << command;
    std::ifstream in(out);
    conninfo_ = new std::string;
    std::getline(in, *conninfo_);
    std::filesystem::remove(out);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      (void)std::system(fmt::format("bash {} stop {}", COHORT_PG_SERVER, *dir_).c_str());
    }
    delete dir_;
    delete conninfo_;
    dir_ = conninfo_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(conninfo_, nullptr);
    // Each test on an empty database.
    Sql("SET client_min_messages = warning; DROP SCHEMA IF EXISTS cohort CASCADE");
  }

  static std::unique_ptr<Store> Open(Store::Mode mode = Store::Mode::kWrite,
                                     std::int64_t epoch = 0) {
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenPostgresStore(*conninfo_, mode, StateSync::kFull, epoch);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  static void Sql(const std::string& sql) {
    absl::StatusOr<std::unique_ptr<pg::Connection>> conn =
        pg::Connection::Open(*conninfo_, std::chrono::seconds(5));
    ASSERT_TRUE(conn.ok()) << conn.status();
    absl::StatusOr<pg::Result> done = (*conn)->Exec(sql, {}, "a test's SQL");
    ASSERT_TRUE(done.ok()) << done.status();
  }

  static StateBatch::JobRow Row(std::int64_t id, v1::JobState state, std::int64_t end_ms = 0,
                                const std::string& user = "alice") {
    return testing::JobRow(id, state, end_ms, user);
  }

  static std::string* dir_;
  static std::string* conninfo_;
};
std::string* PgStoreTest::dir_ = nullptr;
std::string* PgStoreTest::conninfo_ = nullptr;

// What every backend does alike (store_conformance.h).
TEST_F(PgStoreTest, RecordsLoadBack) {
  testing::conformance::RecordsLoadBack([](Store::Mode mode) { return Open(mode); });
}
TEST_F(PgStoreTest, HistoryFiltersAndPurge) {
  testing::conformance::HistoryFiltersAndPurge([](Store::Mode mode) { return Open(mode); });
}
TEST_F(PgStoreTest, NextIdNeverFallsBelowAStoredJob) {
  testing::conformance::NextIdNeverFallsBelowAStoredJob(
      [](Store::Mode mode) { return Open(mode); });
}

TEST_F(PgStoreTest, ABatchLargerThanThePipelineWindowCommitsWhole) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  // 700 jobs with their environments: 1,400 statements, several windows.
  StateBatch batch;
  for (std::int64_t id = 1; id <= 700; ++id) batch.jobs.push_back(Row(id, v1::JOB_PENDING));
  batch.next_job_id = 701;
  ASSERT_TRUE(store->Commit(batch).ok());
  // Text that is not UTF-8 (PostgreSQL refuses it) does not fail a commit:
  // its readable column gets '?' for each bad byte.
  StateBatch odd;
  NodeAdmin drained;
  drained.drain = true;
  drained.reason = "caf\xc3\xa9";
  odd.nodes = {{std::string("n\xff\0\xe2\x82", 5), drained}};
  const absl::Status odd_status = store->Commit(odd);
  ASSERT_TRUE(odd_status.ok()) << odd_status;
  // A batch refused (here by the fence, as a stale controller's would be)
  // leaves nothing of it, however many windows it spans.
  StateBatch broken;
  for (std::int64_t id = 701; id <= 1000; ++id) broken.jobs.push_back(Row(id, v1::JOB_PENDING));
  std::unique_ptr<Store> fenced = Open(Store::Mode::kWrite, 99);  // an epoch nobody holds
  EXPECT_EQ(fenced->Commit(broken).code(), absl::StatusCode::kAborted);
  absl::StatusOr<LoadedState> loaded = Open(Store::Mode::kRead)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->jobs.size(), 700U);
  EXPECT_EQ(loaded->next_job_id, 701);
  ASSERT_EQ(loaded->nodes.size(), 1U);
  EXPECT_EQ(loaded->nodes[0].name, "n????");
  EXPECT_EQ(loaded->nodes[0].admin.reason, "caf\xc3\xa9");
  // And the connection is usable after it.
  StateBatch next;
  next.jobs = {Row(701, v1::JOB_PENDING)};
  EXPECT_TRUE(store->Commit(next).ok());
}

TEST_F(PgStoreTest, AfterATakeoverTheOldHoldersCommitsAreRefused) {
  ASSERT_NE(Open(), nullptr);  // the schema
  Leadership first({.conninfo = *conninfo_,
                    .holder = "ctl1",
                    .address = "ctl1:6820",
                    .timeout = std::chrono::milliseconds(600)});
  absl::StatusOr<std::optional<std::int64_t>> epoch = first.TryAcquire();
  ASSERT_TRUE(epoch.ok() && epoch->has_value()) << epoch.status();
  std::unique_ptr<Store> old_writer = Open(Store::Mode::kWrite, **epoch);
  StateBatch one;
  one.jobs = {Row(1, v1::JOB_PENDING)};
  ASSERT_TRUE(old_writer->Commit(one).ok());

  // A standby sees the live lease and who holds it.
  Leadership second({.conninfo = *conninfo_,
                     .holder = "ctl2",
                     .address = "ctl2:6820",
                     .timeout = std::chrono::milliseconds(600)});
  absl::StatusOr<std::optional<std::int64_t>> waiting = second.TryAcquire();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_FALSE(waiting->has_value());
  EXPECT_EQ(second.Active(), "ctl1:6820");

  // The holder stops renewing (paused); once the lease runs out the
  // standby takes over, and the old holder's next commit is refused.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  absl::StatusOr<std::optional<std::int64_t>> taken = second.TryAcquire();
  ASSERT_TRUE(taken.ok() && taken->has_value()) << taken.status();
  EXPECT_EQ(**taken, **epoch + 1);
  StateBatch two;
  two.jobs = {Row(2, v1::JOB_PENDING)};
  two.next_job_id = 3;
  const absl::Status refused = old_writer->Commit(two);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  EXPECT_NE(refused.message().find("fenced"), std::string_view::npos) << refused;
  std::unique_ptr<Store> new_writer = Open(Store::Mode::kWrite, **taken);
  absl::StatusOr<LoadedState> loaded = new_writer->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->jobs.size(), 1U);  // job 2 never landed
  EXPECT_EQ(loaded->next_job_id, 2);
  EXPECT_TRUE(new_writer->Commit(two).ok());
  // The old holder, renewing, learns it lost the lease.
  std::atomic<bool> lost{false};
  first.Keep([&lost](const std::string&) { lost = true; });
  for (int i = 0; i < 50 && !lost; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(lost);
}

TEST_F(PgStoreTest, ADeadHoldersLeaseIsTakenAtOnceAndANewerSchemaRefused) {
  ASSERT_NE(Open(), nullptr);
  {
    Leadership gone({.conninfo = *conninfo_,
                     .holder = "ctl1",
                     .address = "ctl1:6820",
                     .timeout = std::chrono::seconds(60)});
    ASSERT_TRUE(gone.TryAcquire().value().has_value());
  }  // its session ends, as when its process dies
  Leadership next({.conninfo = *conninfo_,
                   .holder = "ctl2",
                   .address = "ctl2:6820",
                   .timeout = std::chrono::seconds(60)});
  absl::StatusOr<std::optional<std::int64_t>> taken;
  for (int i = 0; i < 50; ++i) {  // the server notices the closed session at once, or nearly
    taken = next.TryAcquire();
    if (!taken.ok() || taken->has_value()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(taken.ok() && taken->has_value()) << "a 60 s lease of a dead session was kept";

  Sql(fmt::format("INSERT INTO cohort.schema_version VALUES({})", kPgSchemaVersion + 1));
  absl::StatusOr<std::unique_ptr<Store>> newer =
      OpenPostgresStore(*conninfo_, Store::Mode::kWrite, StateSync::kFull, 0);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("newer than this cohort-controller knows"),
            std::string_view::npos)
      << newer.status();
}

}  // namespace
}  // namespace cohort::controller
