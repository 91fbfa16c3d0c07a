// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "controller/store_rows.h"
#include "store/store.h"

/// What every state backend does alike (StateBackend=sqlite and
/// postgresql): store_test and pg_store_test each run these against a store
/// of their own, so that the two cannot drift apart.
namespace cohort::controller::testing::conformance {

/// Opens a new connection to the test's store.
using Opener = std::function<std::unique_ptr<Store>(Store::Mode)>;

/// Finished, running and pending jobs, a drained node and one set DOWN, usage
/// with a budget's use, what sacctmgr made; the next id 6.
inline StateBatch Batch() {
  StateBatch batch;
  batch.jobs = {JobRow(1, v1::JOB_COMPLETED, 1000), JobRow(2, v1::JOB_FAILED, 2000, "bob"),
                JobRow(3, v1::JOB_CANCELLED, 3000), JobRow(4, v1::JOB_RUNNING),
                JobRow(5, v1::JOB_PENDING)};
  batch.nodes = {
      {"node01",
       {.drain = true, .down = false, .reason = "bad fan", .uid = 1001, .since = Millis(5)}},
      {"node02",
       {.drain = false,
        .down = true,
        .reason = "PSU swap",
        .uid = std::nullopt,
        .since = Millis(9)}}};
  batch.next_job_id = 6;
  v1::UsageRecordProto usage;
  usage.set_account("alice");
  usage.set_usage(12.5);
  usage.set_as_of_ms(777);
  usage.set_gpu_seconds(3600.5);
  usage.set_cpu_seconds(7200);
  usage.set_period_start_ms(1'000'000);
  batch.usage = std::vector{usage};
  v1::AccountingRecord& accounting = batch.accounting.emplace();
  v1::Association& lab = *accounting.add_associations();
  lab.set_account("lab");
  lab.set_parent("science");
  lab.set_grp_tres_mins("gres/gpu=600");
  lab.set_managed(true);
  v1::Reservation& maint = batch.reservations.emplace().emplace_back();
  maint.set_name("maint");
  maint.set_start_ms(1000);
  maint.set_end_ms(9000);
  maint.set_nodes("node[01-04]");
  maint.set_flags("MAINT");
  v1::AccountTransaction& added = *accounting.add_audit();
  added.set_time_ms(55);
  added.set_action("Add Account");
  added.set_where("lab");
  batch.partitions = std::vector<PartitionAdmin>{
      {.name = "gpu", .state = config::PartitionState::kDrain, .uid = 0, .since = Millis(11)},
      {.name = "old",
       .state = config::PartitionState::kInactive,
       .uid = std::nullopt,
       .since = Millis(12)}};
  return batch;
}

/// What was committed loads back through another connection: the jobs not
/// yet finished, with their environments; finished ones as history only.
inline void RecordsLoadBack(const Opener& open) {
  std::unique_ptr<Store> store = open(Store::Mode::kWrite);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit(Batch()).ok());
  std::unique_ptr<Store> reader = open(Store::Mode::kRead);
  ASSERT_NE(reader, nullptr);
  absl::StatusOr<LoadedState> loaded = reader->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->jobs.size(), 2U);
  EXPECT_EQ(loaded->jobs[0].id(), 4);
  EXPECT_EQ(loaded->jobs[1].id(), 5);
  EXPECT_EQ(loaded->next_job_id, 6);
  // Every field, the setter's uid and its absence (the controller's) too.
  ASSERT_EQ(loaded->nodes.size(), 2U);
  EXPECT_EQ(loaded->nodes[0].name, "node01");
  EXPECT_EQ(loaded->nodes[0].admin, Batch().nodes[0].admin);
  EXPECT_EQ(loaded->nodes[1].name, "node02");
  EXPECT_EQ(loaded->nodes[1].admin, Batch().nodes[1].admin);
  EXPECT_EQ(loaded->partitions, *Batch().partitions);
  ASSERT_EQ(loaded->usage.size(), 1U);
  EXPECT_DOUBLE_EQ(loaded->usage[0].usage(), 12.5);
  EXPECT_DOUBLE_EQ(loaded->usage[0].gpu_seconds(), 3600.5);
  EXPECT_DOUBLE_EQ(loaded->usage[0].cpu_seconds(), 7200);
  EXPECT_EQ(loaded->usage[0].period_start_ms(), 1'000'000);
  EXPECT_EQ(loaded->accounting.SerializeAsString(), Batch().accounting->SerializeAsString());
  ASSERT_EQ(loaded->reservations.size(), 1U);
  EXPECT_EQ(loaded->reservations[0].SerializeAsString(),
            Batch().reservations->front().SerializeAsString());
  absl::StatusOr<std::optional<v1::JobSpec>> env = reader->FindEnvironment(5);
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->env(0).value(), "/usr/bin");
  EXPECT_FALSE(reader->FindEnvironment(1)->has_value());  // finished: no environment kept
  EXPECT_EQ((*reader->FindJob(2))->user_name(), "bob");
  EXPECT_EQ((*reader->FindJob(3))->state(), v1::JOB_CANCELLED);
  EXPECT_FALSE(reader->FindJob(99)->has_value());
}

/// History answers each filter alike, purges the oldest finished jobs a
/// bounded number at a time, never a job that has not finished.
inline void HistoryFiltersAndPurge(const Opener& open) {
  std::unique_ptr<Store> store = open(Store::Mode::kWrite);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit(Batch()).ok());
  const auto ids = [&](const HistoryQuery& query) {
    std::vector<std::int64_t> out;
    absl::StatusOr<std::vector<v1::JobRecord>> records = store->History(query);
    EXPECT_TRUE(records.ok()) << records.status();
    if (records.ok()) {
      for (const v1::JobRecord& r : *records) out.push_back(r.id());
    }
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<std::int64_t>{1, 2, 3}));
  HistoryQuery mine;
  mine.uid = 1000;
  EXPECT_EQ(ids(mine), (std::vector<std::int64_t>{1, 3}));
  mine.account = "alice";
  EXPECT_EQ(ids(mine), (std::vector<std::int64_t>{1, 3}));
  HistoryQuery failed;
  failed.states = {v1::JOB_FAILED, v1::JOB_TIMEOUT};
  EXPECT_EQ(ids(failed), (std::vector<std::int64_t>{2}));
  failed.user_name = "bob";
  EXPECT_EQ(ids(failed), (std::vector<std::int64_t>{2}));
  HistoryQuery window;
  window.since_ms = 1500;
  window.until_ms = 3000;
  EXPECT_EQ(ids(window), (std::vector<std::int64_t>{2}));
  HistoryQuery by_id;
  by_id.job_ids = {3, 4};
  EXPECT_EQ(ids(by_id), (std::vector<std::int64_t>{3}));
  by_id.job_ids = {3, 4, 1};
  by_id.limit = 1;
  EXPECT_EQ(ids(by_id), (std::vector<std::int64_t>{1}));

  EXPECT_EQ(store->PurgeHistory(2500, 1).value(), 1);
  EXPECT_EQ(store->PurgeHistory(2500, 10).value(), 1);
  EXPECT_EQ(store->PurgeHistory(2500, 10).value(), 0);
  EXPECT_EQ(ids({}), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(store->Load()->jobs.size(), 2U);  // the running and pending jobs stay
  absl::StatusOr<StateReport> report = store->Check();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 3);
  EXPECT_EQ(report->active_jobs, 2);
}

/// The next id never falls below a stored job's, whatever a batch says.
inline void NextIdNeverFallsBelowAStoredJob(const Opener& open) {
  std::unique_ptr<Store> store = open(Store::Mode::kWrite);
  ASSERT_NE(store, nullptr);
  StateBatch batch;
  batch.jobs = {JobRow(41, v1::JOB_PENDING)};
  batch.next_job_id = 7;  // an older value must not hand out 41 again
  ASSERT_TRUE(store->Commit(batch).ok());
  EXPECT_EQ(store->Load()->next_job_id, 42);
}

}  // namespace cohort::controller::testing::conformance
