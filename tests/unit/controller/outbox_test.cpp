// SPDX-License-Identifier: Apache-2.0
// The durable outbox: what it holds waits for the commit of every change
// made before it, a failed commit delivers nothing, and a clean stop
// writes what is left.
#include "outbox.h"

#include <sqlite3.h>

#include <atomic>
#include <map>

#include <gtest/gtest.h>

#include "controller/controller_test_support.h"

namespace cohort::controller {
namespace {

using testing::RunUntil;

// Jobs as plain records, as the engine would give them.
class FakeRecords final : public RecordSource {
 public:
  bool JobRow(JobId id, WithEnv with_env, StateBatch::JobRow& row) override {
    const auto it = jobs.find(id);
    if (it == jobs.end()) return false;
    row.record = it->second;
    if (with_env == WithEnv::kYes) row.env = v1::JobSpec().SerializeAsString();
    return true;
  }
  [[nodiscard]] NodeAdmin Admin(NodeId /*node*/) const override { return {}; }
  [[nodiscard]] std::string NodeName(NodeId node) const override {
    return "n" + std::to_string(node);
  }
  [[nodiscard]] std::vector<PartitionAdmin> PartitionOverrides() const override {
    return partitions;
  }
  [[nodiscard]] JobId NextId() const override { return next_id; }
  [[nodiscard]] std::vector<policy::UsageRecord> Usage(Millis /*now*/) const override { return {}; }
  [[nodiscard]] v1::AccountingRecord Accounting() const override { return {}; }
  [[nodiscard]] std::vector<v1::Reservation> Reservations() const override { return {}; }

  void Put(JobId id, v1::JobState state) {
    v1::JobRecord& record = jobs[id];
    record.set_id(id);
    record.set_state(state);
    record.set_user_name("alice");
    record.set_partition("all");
    next_id = std::max(next_id, id + 1);
  }

  std::map<JobId, v1::JobRecord> jobs;
  std::vector<PartitionAdmin> partitions;
  JobId next_id = 1;
};

// The real database, whose commits fail for want of space while `full`
// is set, as SQLite's do on a full disk (SQLITE_FULL: ResourceExhausted,
// the transaction rolled back). The integration test fills a real disk.
class FillingStore final : public Store {
 public:
  explicit FillingStore(std::unique_ptr<Store> real) : real_(std::move(real)) {}
  absl::StatusOr<LoadedState> Load() override { return real_->Load(); }
  absl::Status Commit(const StateBatch& batch) override {
    if (full) return absl::ResourceExhaustedError("state database: the disk is full");
    return real_->Commit(batch);
  }
  absl::StatusOr<std::optional<v1::JobRecord>> FindJob(std::int64_t id) override {
    return real_->FindJob(id);
  }
  absl::StatusOr<std::optional<v1::JobSpec>> FindEnvironment(std::int64_t id) override {
    return real_->FindEnvironment(id);
  }
  absl::StatusOr<std::vector<v1::JobRecord>> History(const HistoryQuery& query) override {
    return real_->History(query);
  }
  absl::StatusOr<int> PurgeHistory(std::int64_t before_ms, int limit) override {
    return real_->PurgeHistory(before_ms, limit);
  }
  absl::StatusOr<StateReport> Check() override { return real_->Check(); }

  std::atomic<bool> full{false};

 private:
  std::unique_ptr<Store> real_;
};

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    outbox_ = std::make_unique<Outbox>(io_, records_, dir_.Open(Store::Mode::kWrite), nullptr, 4);
    outbox_->LoadedNextId(records_.next_id);  // as a restored controller
  }

  testing::StateDir dir_;
  boost::asio::io_context io_;
  FakeRecords records_;
  std::unique_ptr<Outbox> outbox_;
};

TEST_F(OutboxTest, NothingWaitingRunsAtOnce) {
  bool ran = false;
  outbox_->Defer([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST_F(OutboxTest, ReplyWaitsForTheCommitOfItsJob) {
  records_.Put(7, v1::JOB_PENDING);
  outbox_->MarkChanged({7}, {});
  outbox_->MarkNew(7);
  std::optional<absl::StatusOr<int>> reply;
  std::optional<v1::JobRecord> durable_at_reply;
  outbox_->Respond<int>(
      [&](absl::StatusOr<int> result) {
        durable_at_reply = dir_.DurableJob(7);
        reply = std::move(result);
      },
      42);
  EXPECT_FALSE(reply.has_value()) << "a reply went out before its job was written";
  EXPECT_FALSE(dir_.DurableJob(7).has_value());
  ASSERT_TRUE(RunUntil(io_, [&] { return reply.has_value(); }));
  ASSERT_TRUE(reply->ok());
  EXPECT_EQ(**reply, 42);
  ASSERT_TRUE(durable_at_reply.has_value()) << "the reply came before the commit";
  EXPECT_EQ(durable_at_reply->state(), v1::JOB_PENDING);
}

// An operator's partition state is all that changed: its reply still waits
// for the commit that writes it.
TEST_F(OutboxTest, APartitionStateIsCommittedBeforeItsReply) {
  records_.partitions = {
      {.name = "gpu", .state = config::PartitionState::kDown, .uid = 0, .since = Millis(7)}};
  outbox_->MarkPartitionsChanged();
  bool replied = false;
  outbox_->Defer([&] { replied = true; });
  EXPECT_FALSE(replied) << "a reply went out before the partition's state was written";
  ASSERT_TRUE(RunUntil(io_, [&] { return replied; }));
  absl::StatusOr<LoadedState> loaded = dir_.Open(Store::Mode::kRead)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->partitions, records_.partitions);
}

TEST_F(OutboxTest, LaterClosuresWaitBehindEarlierChangesInOrder) {
  records_.Put(1, v1::JOB_PENDING);
  outbox_->MarkChanged({1}, {});
  std::vector<int> order;
  outbox_->Defer([&] { order.push_back(1); });
  // Nothing new changed, but an earlier closure waits: this one may not pass it.
  outbox_->Defer([&] { order.push_back(2); });
  ASSERT_TRUE(RunUntil(io_, [&] { return order.size() == 2; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_F(OutboxTest, ChangesMadeDuringACommitGoInTheNext) {
  records_.Put(1, v1::JOB_PENDING);
  outbox_->MarkChanged({1}, {});
  bool first = false;
  outbox_->Defer([&] { first = true; });
  ASSERT_TRUE(RunUntil(io_, [&] { return first; }));
  records_.Put(1, v1::JOB_RUNNING);
  outbox_->MarkChanged({1}, {});
  std::optional<v1::JobRecord> durable;
  outbox_->Defer([&] { durable = dir_.DurableJob(1); });
  ASSERT_TRUE(RunUntil(io_, [&] { return durable.has_value(); }));
  EXPECT_EQ(durable->state(), v1::JOB_RUNNING);
}

TEST_F(OutboxTest, FailedCommitDeliversNothingAndStops) {
  // Another program breaks the database under the controller.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.Path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE jobs", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  records_.Put(3, v1::JOB_PENDING);
  outbox_->MarkChanged({3}, {});
  bool delivered = false;
  outbox_->Defer([&] { delivered = true; });
  ASSERT_TRUE(RunUntil(io_, [&] { return outbox_->Failed(); }));
  EXPECT_TRUE(io_.stopped());
  io_.restart();
  io_.poll();
  EXPECT_FALSE(delivered) << "a closure ran although its commit failed";
  // No later change is acknowledged either.
  records_.Put(4, v1::JOB_PENDING);
  outbox_->MarkChanged({4}, {});
  outbox_->Defer([&] { delivered = true; });
  io_.restart();
  io_.poll();
  EXPECT_FALSE(delivered);
}

// A full disk stalls the batch rather than stopping: nothing in it is
// acknowledged, changes are refused while it waits, reads answer at once,
// and once space returns the batch lands and its answers go out.
TEST(OutboxFullDiskTest, AFullDiskStallsAndResumes) {
  testing::StateDir dir;
  boost::asio::io_context io;
  FakeRecords records;
  auto filling = std::make_unique<FillingStore>(dir.Open(Store::Mode::kWrite));
  FillingStore& store = *filling;
  Outbox outbox(io, records, std::move(filling), nullptr, 4);
  outbox.LoadedNextId(records.next_id);
  store.full = true;

  records.Put(5, v1::JOB_PENDING);
  outbox.MarkChanged({5}, {});
  outbox.MarkNew(5);
  bool acknowledged = false;
  outbox.Defer([&] { acknowledged = true; });
  ASSERT_TRUE(RunUntil(io, [&] { return !outbox.WriteRefusal().ok(); }));
  EXPECT_EQ(outbox.WriteRefusal().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(outbox.WriteRefusal().message().find("try again later"), std::string_view::npos);
  EXPECT_FALSE(outbox.Failed()) << "a full disk stopped the controller";
  EXPECT_FALSE(acknowledged) << "a submission was acknowledged before it was durable";
  EXPECT_FALSE(dir.DurableJob(5).has_value());

  bool read = false;
  {
    const Outbox::ReadScope reading(outbox);
    outbox.Defer([&] { read = true; });
  }
  EXPECT_TRUE(read) << "a read waited for the disk";

  store.full = false;
  ASSERT_TRUE(RunUntil(io, [&] { return acknowledged; }));
  EXPECT_TRUE(outbox.WriteRefusal().ok());
  ASSERT_TRUE(dir.DurableJob(5).has_value());
  EXPECT_GE(outbox.Stalls(), 1U);
  outbox.Shutdown();
}

TEST_F(OutboxTest, ShutdownWritesWhatIsLeft) {
  records_.Put(9, v1::JOB_PENDING);
  outbox_->MarkChanged({9}, {});
  outbox_->Shutdown();
  const std::optional<v1::JobRecord> durable = dir_.DurableJob(9);
  ASSERT_TRUE(durable.has_value());
  EXPECT_EQ(durable->state(), v1::JOB_PENDING);
}

}  // namespace
}  // namespace cohort::controller
