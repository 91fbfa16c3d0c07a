// SPDX-License-Identifier: Apache-2.0
// The watch hub: a watcher hears of a change only once it is durable, its
// stream ends with the job's final event, and a watcher gone meanwhile
// hears nothing.
#include "watch_hub.h"

#include <gtest/gtest.h>

#include "controller/controller_test_support.h"

namespace cohort::controller {
namespace {

using testing::RunUntil;

class OneJobRecords final : public RecordSource {
 public:
  bool JobRow(JobId id, WithEnv /*with_env*/, StateBatch::JobRow& row) override {
    row.record.set_id(id);
    row.record.set_state(state);
    row.record.set_user_name("alice");
    return true;
  }
  [[nodiscard]] NodeAdmin Admin(NodeId /*node*/) const override { return {}; }
  [[nodiscard]] std::string NodeName(NodeId /*node*/) const override { return "n1"; }
  [[nodiscard]] std::vector<PartitionAdmin> PartitionOverrides() const override { return {}; }
  [[nodiscard]] JobId NextId() const override { return 2; }
  [[nodiscard]] std::vector<policy::UsageRecord> Usage(Millis /*now*/) const override { return {}; }
  [[nodiscard]] v1::AccountingRecord Accounting() const override { return {}; }
  [[nodiscard]] std::vector<v1::Reservation> Reservations() const override { return {}; }
  v1::JobState state = v1::JOB_PENDING;
};

struct Pushed {
  v1::JobState state;
  JobWatcher::Last last;
  std::optional<v1::JobState> durable;  ///< the job's state in the store at the push
};

class FakeWatcher final : public JobWatcher {
 public:
  explicit FakeWatcher(const testing::StateDir& dir) : dir_(dir) {}
  void Push(v1::JobEvent event, Last last) override {
    std::optional<v1::JobRecord> record = dir_.DurableJob(event.job().id());
    pushed.push_back({event.job().state(), last,
                      record ? std::optional<v1::JobState>(record->state()) : std::nullopt});
  }
  std::vector<Pushed> pushed;

 private:
  const testing::StateDir& dir_;
};

v1::JobEvent Event(v1::JobState state) {
  v1::JobEvent event;
  event.mutable_job()->set_id(1);
  event.mutable_job()->set_state(state);
  return event;
}

class WatchHubTest : public ::testing::Test {
 protected:
  WatchHubTest() : outbox_(io_, records_, dir_.Open(Store::Mode::kWrite), nullptr, 1) {
    outbox_.LoadedNextId(2);
  }

  // Changes job 1 and tells its watchers, as the controller does.
  void Change(v1::JobState state, JobWatcher::Last last) {
    records_.state = state;
    outbox_.MarkChanged({1}, {});
    hub_.Publish(1, Event(state), last);
  }
  // Runs the state thread until everything deferred so far has run.
  void Drain() {
    bool done = false;
    outbox_.Defer([&] { done = true; });
    ASSERT_TRUE(RunUntil(io_, [&] { return done; }));
  }

  testing::StateDir dir_;
  boost::asio::io_context io_;
  OneJobRecords records_;
  Outbox outbox_;
  WatchHub hub_{outbox_};
};

TEST_F(WatchHubTest, WatcherGetsTheJobNowThenEachDurableChangeAndTheLast) {
  FakeWatcher watcher(dir_);
  std::optional<absl::StatusOr<bool>> reply;
  hub_.Watch(1, &watcher, Event(v1::JOB_PENDING), JobWatcher::Last::kNo,
             [&](absl::StatusOr<bool> r) { reply = r; });
  ASSERT_TRUE(RunUntil(io_, [&] { return watcher.pushed.size() == 1; }));
  EXPECT_TRUE(reply.has_value() && reply->ok());
  EXPECT_TRUE(hub_.Watched(1));

  Change(v1::JOB_RUNNING, JobWatcher::Last::kNo);
  EXPECT_EQ(watcher.pushed.size(), 1U) << "an event went out before its change was durable";
  Change(v1::JOB_COMPLETED, JobWatcher::Last::kYes);
  EXPECT_FALSE(hub_.Watched(1)) << "a finished job's watchers are forgotten";
  ASSERT_TRUE(RunUntil(io_, [&] { return watcher.pushed.size() == 3; }));

  EXPECT_EQ(watcher.pushed[1].state, v1::JOB_RUNNING);
  EXPECT_EQ(watcher.pushed[1].last, JobWatcher::Last::kNo);
  EXPECT_EQ(watcher.pushed[2].state, v1::JOB_COMPLETED);
  EXPECT_EQ(watcher.pushed[2].last, JobWatcher::Last::kYes);
  EXPECT_EQ(watcher.pushed[2].durable, v1::JOB_COMPLETED)
      << "the final event went out before the final state was durable";

  // Nothing after the last event.
  Change(v1::JOB_COMPLETED, JobWatcher::Last::kYes);
  Drain();
  EXPECT_EQ(watcher.pushed.size(), 3U);
}

TEST_F(WatchHubTest, WatchOfAFinishedJobEndsWithItsState) {
  FakeWatcher watcher(dir_);
  hub_.Watch(1, &watcher, Event(v1::JOB_FAILED), JobWatcher::Last::kYes,
             [](absl::StatusOr<bool> /*reply*/) {});
  ASSERT_TRUE(RunUntil(io_, [&] { return watcher.pushed.size() == 1; }));
  EXPECT_EQ(watcher.pushed[0].last, JobWatcher::Last::kYes);
  EXPECT_FALSE(hub_.Watched(1));
}

TEST_F(WatchHubTest, WatcherGoneBeforeTheCommitHearsNothing) {
  FakeWatcher stays(dir_);
  FakeWatcher leaves(dir_);
  for (FakeWatcher* w : {&stays, &leaves}) {
    hub_.Watch(1, w, Event(v1::JOB_PENDING), JobWatcher::Last::kNo,
               [](absl::StatusOr<bool> /*reply*/) {});
  }
  Drain();
  ASSERT_EQ(leaves.pushed.size(), 1U);
  Change(v1::JOB_CANCELLED, JobWatcher::Last::kYes);
  hub_.Unwatch(&leaves);  // its stream ended while the commit was on its way
  Drain();
  EXPECT_EQ(leaves.pushed.size(), 1U);
  ASSERT_EQ(stays.pushed.size(), 2U);
  EXPECT_EQ(stays.pushed[1].state, v1::JOB_CANCELLED);
  EXPECT_EQ(stays.pushed[1].last, JobWatcher::Last::kYes);
}

}  // namespace
}  // namespace cohort::controller
