// SPDX-License-Identifier: Apache-2.0
#include "format/policy_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "format/job_format.h"
#include "test_support.h"

namespace cohort::cli {
namespace {

// 2024-05-01T13:45:00 UTC.
constexpr std::int64_t kNowMs = 1714571100000;

// Times are local; the tests read them in UTC.
class PolicyFormatTest : public cohort::testing::UtcTest {};

v1::Job ArrayTask(std::int64_t id, std::int64_t array, int task) {
  v1::Job job;
  job.set_id(id);
  job.set_array_job_id(array);
  job.set_array_task_id(task);
  job.set_display_id(task >= 0 ? std::to_string(array) + "_" + std::to_string(task)
                               : std::to_string(array));
  return job;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream out;
  PrintColumns(rows, out);
  return out.str();
}

TEST_F(PolicyFormatTest, DisplayIdsAreAsSqueueShowsThem) {
  v1::Job plain;
  plain.set_id(7);
  EXPECT_EQ(JobDisplayId(plain), "7");  // no display id sent: the number
  plain.set_display_id("7");
  EXPECT_EQ(JobDisplayId(plain), "7");
  EXPECT_EQ(JobDisplayId(ArrayTask(15, 12, 3)), "12_3");

  v1::Job rest = ArrayTask(12, 12, -1);
  rest.set_array_pending("5-999%8");
  EXPECT_EQ(JobDisplayId(rest), "12_[5-999%8]");
  rest.set_array_pending("");  // every task has started: the array by its id
  EXPECT_EQ(JobDisplayId(rest), "12");
}

TEST_F(PolicyFormatTest, ArraysAreListedTogetherTheirRestLast) {
  v1::Job rest = ArrayTask(12, 12, -1);
  rest.set_array_pending("2-9");
  v1::Job plain;
  plain.set_id(13);
  std::vector<v1::Job> jobs = {plain, rest, ArrayTask(20, 12, 1), ArrayTask(14, 12, 0)};
  std::sort(jobs.begin(), jobs.end(), DisplayOrder);
  std::vector<std::string> ids;
  for (const v1::Job& job : jobs) ids.push_back(JobDisplayId(job));
  EXPECT_EQ(ids, (std::vector<std::string>{"12_0", "12_1", "12_[2-9]", "13"}));
}

TEST_F(PolicyFormatTest, JobJsonHasThePolicyFields) {
  v1::Job job = ArrayTask(15, 12, 3);
  job.set_qos("high");
  job.set_priority(4321);
  job.set_held(true);
  job.set_dependency("afterok:9");
  job.mutable_spec()->set_array("0-9");
  v1::Preemption* p = job.add_preemptions();
  p->set_time_ms(kNowMs);
  p->set_by_job(30);
  p->set_by_display_id("30");
  p->set_mode("REQUEUE");
  p->set_attempt(1);
  p->set_signal(10);
  p->set_grace_s(60);
  p->set_detail("checkpoint done after 3 s");
  const nlohmann::ordered_json json = JobToJson(job, kNowMs);
  EXPECT_EQ(json["display_id"], "12_3");
  EXPECT_EQ(json["array_job_id"], 12);
  EXPECT_EQ(json["array_task_id"], 3);
  EXPECT_EQ(json["array"], "0-9");
  EXPECT_EQ(json["qos"], "high");
  EXPECT_EQ(json["priority"], 4321);
  EXPECT_TRUE(json["expected_start_ms"].is_null());
  EXPECT_EQ(json["held"], true);
  EXPECT_EQ(json["dependency"], "afterok:9");
  EXPECT_EQ(json["suspended"], false);
  EXPECT_TRUE(json["preempt_deadline_ms"].is_null());
  ASSERT_EQ(json["preemptions"].size(), 1u);
  EXPECT_EQ(json["preemptions"][0].dump(),
            R"({"time_ms":1714571100000,"by_job":30,"by_display_id":"30","mode":"REQUEUE",)"
            R"("attempt":1,"signal":"USR1","grace_s":60,"detail":"checkpoint done after 3 s"})");

  v1::Job plain;
  plain.set_id(4);
  EXPECT_TRUE(JobToJson(plain, kNowMs)["array_job_id"].is_null());
  EXPECT_TRUE(JobToJson(plain, kNowMs)["array_task_id"].is_null());
  EXPECT_EQ(JobToJson(plain, kNowMs)["preemptions"].dump(), "[]");
}

v1::PriorityResponse Priorities() {
  v1::PriorityResponse response;
  response.set_weight_age(1000);
  response.set_weight_fairshare(10000);
  response.set_weight_job_size(1000);
  response.set_weight_partition(1000);
  response.set_weight_qos(2000);
  v1::JobPriority* a = response.add_jobs();
  a->set_job_id(15);
  a->set_display_id("12_3");
  a->set_user_name("alice");
  a->set_account("physics");
  a->set_partition("gpu");
  a->set_qos("high");
  a->set_total(8276);
  a->set_age(250.4);
  a->set_fairshare(4900.6);
  a->set_job_size(125);
  a->set_partition_factor(1000);
  a->set_qos_factor(2000);
  a->set_age_raw(0.2504);
  a->set_fairshare_raw(0.49006);
  a->set_job_size_raw(0.125);
  a->set_partition_raw(1);
  a->set_qos_raw(1);
  v1::JobPriority* b = response.add_jobs();
  b->set_job_id(9);
  b->set_user_name("bob");
  b->set_account("chem");
  b->set_partition("gpu");
  b->set_qos("normal");
  b->set_total(1062);
  b->set_fairshare(1000);
  b->set_job_size(62.5);
  b->set_fairshare_raw(0.1);
  b->set_job_size_raw(0.0625);
  return response;
}

TEST_F(PolicyFormatTest, PriorityTableIsWeightedAsSprio) {
  EXPECT_EQ(Table(PriorityRows(Priorities(), PriorityValues::kWeighted)),
            "JOBID    USER   ACCOUNT  PARTITION  QOS     PRIORITY  AGE   FAIRSHARE "
            " JOBSIZE  PARTITION  QOS\n"
            "Weights                                               1000  10000     "
            " 1000     1000       2000\n"
            "12_3     alice  physics  gpu        high    8276      250   4901      "
            " 125      1000       2000\n"
            "9        bob    chem     gpu        normal  1062      0     1000      "
            " 62       0          0\n");
}

TEST_F(PolicyFormatTest, PriorityTableShowsTheFactorsWithRaw) {
  const std::vector<std::vector<std::string>> rows =
      PriorityRows(Priorities(), PriorityValues::kNormalised);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1][6], "1000");  // the weights stay whole
  EXPECT_EQ(rows[2], (std::vector<std::string>{"12_3", "alice", "physics", "gpu", "high", "8276",
                                               "0.2504", "0.4901", "0.1250", "1.0000", "1.0000"}));
  EXPECT_EQ(rows[3][0], "9");  // no display id sent: the number
  EXPECT_EQ(rows[3][7], "0.1000");
}

TEST_F(PolicyFormatTest, PriorityJsonKeepsEveryNumber) {
  const nlohmann::ordered_json json = PrioritiesToJson(Priorities());
  EXPECT_EQ(json["weights"].dump(),
            R"({"age":1000,"fairshare":10000,"job_size":1000,"partition":1000,"qos":2000})");
  ASSERT_EQ(json["jobs"].size(), 2u);
  EXPECT_EQ(json["jobs"][0]["display_id"], "12_3");
  EXPECT_EQ(json["jobs"][0]["priority"], 8276);
  EXPECT_DOUBLE_EQ(json["jobs"][0]["fairshare"].get<double>(), 4900.6);
  EXPECT_DOUBLE_EQ(json["jobs"][0]["fairshare_raw"].get<double>(), 0.49006);
  EXPECT_EQ(json["jobs"][1]["display_id"], "9");
}

v1::SharesResponse Shares() {
  v1::SharesResponse response;
  response.set_half_life_s(7 * 24 * 3600);
  auto add = [&](const char* account, const char* user, int shares, double norm_shares,
                 double usage, double norm_usage, double factor) {
    v1::AccountShare* row = response.add_rows();
    row->set_account(account);
    row->set_user(user);
    row->set_shares(shares);
    row->set_norm_shares(norm_shares);
    row->set_usage_gpu_seconds(usage);
    row->set_norm_usage(norm_usage);
    row->set_factor(factor);
  };
  add("chem", "", 1, 0.5, 0, 0, 1);
  add("physics", "", 1, 0.5, 36000, 1, 0.25);
  add("physics", "alice", 2, 0.666667, 27000, 0.75, 0.115);
  return response;
}

TEST_F(PolicyFormatTest, SharesTableIsAsSshare) {
  EXPECT_EQ(Table(SharesRows(Shares())),
            "Account   User   RawShares  NormShares  RawUsage(GPU-h)  NormUsage  FairShare\n"
            "chem             1          0.500000    0.00             0.000000   1.000000\n"
            "physics          1          0.500000    10.00            1.000000   0.250000\n"
            " physics  alice  2          0.666667    7.50             0.750000   0.115000\n");
}

TEST_F(PolicyFormatTest, SharesJsonMarksTheAccountRows) {
  const nlohmann::ordered_json json = SharesToJson(Shares());
  EXPECT_EQ(json["half_life_s"], 604800);
  ASSERT_EQ(json["rows"].size(), 3u);
  EXPECT_TRUE(json["rows"][0]["user"].is_null());
  EXPECT_EQ(json["rows"][2].dump(),
            R"({"account":"physics","parent":"","user":"alice","shares":2,"norm_shares":0.666667,)"
            R"("usage_gpu_seconds":27000.0,"norm_usage":0.75,"fairshare":0.115})");
}

TEST_F(PolicyFormatTest, ExpectedStartCellIsNotAvailableWhenUnknown) {
  v1::Job job;
  EXPECT_EQ(ExpectedStartCell(job), "N/A");
  job.set_expected_start_ms(kNowMs);
  EXPECT_EQ(ExpectedStartCell(job), "2024-05-01T13:45:00");
}

}  // namespace
}  // namespace cohort::cli
