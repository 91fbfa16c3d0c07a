// SPDX-License-Identifier: Apache-2.0
#include "format/why_view.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "test_support.h"

namespace cohort::cli {
namespace {

// 2024-05-01T13:45:00 UTC.
constexpr std::int64_t kNowMs = 1714571100000;

// Times are local; the tests read them in UTC.
class WhyViewTest : public cohort::testing::UtcTest {};

v1::ExplainJobResponse Job(v1::JobState state, std::string_view reason) {
  v1::ExplainJobResponse response;
  v1::Job& job = *response.mutable_job();
  job.set_id(15);
  job.set_display_id("12_3");
  job.set_state(state);
  job.set_reason(std::string(reason));
  job.mutable_spec()->set_name("train");
  job.mutable_spec()->set_user_name("alice");
  if (state == v1::JOB_PENDING) response.set_pending_reason(std::string(reason));
  response.set_explained_at_ms(kNowMs);
  return response;
}

// A 16-node job that three jobs of higher priority are ahead of, that no
// leaf switch can hold now, and that three changes would start at once.
v1::ExplainJobResponse Blocked() {
  v1::ExplainJobResponse response = Job(v1::JOB_PENDING, "Resources");
  v1::WaitFacts& wait = *response.mutable_wait();
  wait.set_partition("gpu");
  wait.set_nodes(16);
  wait.set_ahead_count(4);
  for (const auto& [id, priority, nodes] :
       {std::tuple{"9", 9100, 16}, std::tuple{"10", 9000, 1}, std::tuple{"11_2", 8000, 2}}) {
    v1::JobAhead& ahead = *wait.add_ahead();
    ahead.set_display_id(id);
    ahead.set_priority(priority);
    ahead.set_nodes(nodes);
  }
  wait.set_shortfall("16 nodes under one leaf switch\nare not free");
  for (const auto& [name, fitting] : {std::pair{"leaf1", 12}, std::pair{"leaf2", 8}}) {
    v1::LeafFit& leaf = *wait.add_closest_leaves();
    leaf.set_name(name);
    leaf.set_fitting(fitting);
    leaf.set_nodes(16);
  }
  wait.set_has_time_limit(true);
  v1::Counterfactuals& sooner = *response.mutable_sooner();
  sooner.set_fewer_nodes(12);
  sooner.set_without_switches(1);
  sooner.add_partitions("debug");
  return response;
}

TEST_F(WhyViewTest, SaysTheFactsInWords) {
  v1::ExplainJobResponse response = Blocked();
  response.set_expected_start_ms(kNowMs + 3600'000 + 30'000);
  EXPECT_EQ(ExplainText(response, kNowMs),
            "Job 12_3 (train, user alice) is PENDING (Resources).\n"
            "Job 12_3 waits for resources; the backfill plan starts it by 2024-05-01T14:45:30 "
            "(in about 60 minutes).\n"
            "\n"
            "What keeps it from starting:\n"
            "  - 4 jobs of higher priority wait ahead of it in partition gpu: 9 (priority 9100, "
            "16 nodes), 10 (priority 9000, 1 node), 11_2 (priority 8000, 2 nodes), …\n"
            "  - resources: 16 nodes under one leaf switch\n"
            "    are not free\n"
            "  - closest switches for its 16 nodes: leaf1 has 12 of 16 nodes free enough; leaf2 "
            "has 8 of 16 nodes free enough\n"
            "\n"
            "Expected start: 2024-05-01T14:45:30 (in 1:00:30)\n"
            "\n"
            "What would let it start sooner:\n"
            "  - with -N 12 it could start now\n"
            "  - without --switches=1 it could start now, spread over more leaf switches\n"
            "  - partition debug could start it now (-p debug)\n");
}

TEST_F(WhyViewTest, SaysWhenTheStartIsUnknownOrDue) {
  v1::ExplainJobResponse response = Job(v1::JOB_PENDING, "Resources");
  EXPECT_EQ(ExplainText(response, kNowMs),
            "Job 12_3 (train, user alice) is PENDING (Resources).\n"
            "Job 12_3 waits for resources; no start time is known yet (the jobs in its way have "
            "no time limit).\n"
            "\n"
            "Expected start: unknown (the backfill plan has no place for it yet)\n");
  response.mutable_wait()->set_beyond_backfill_depth(true);
  EXPECT_NE(WhyInWords(response).summary.find("beyond the backfill depth"), std::string::npos);
  // The job's own field stands in when the answer has none.
  response.mutable_job()->set_expected_start_ms(kNowMs - 1000);
  EXPECT_NE(ExplainText(response, kNowMs).find("Expected start: 2024-05-01T13:44:59 (due now)\n"),
            std::string::npos);
}

TEST_F(WhyViewTest, APriorityWaitWithNothingToChangeSuggestsAShorterTime) {
  v1::ExplainJobResponse response = Job(v1::JOB_PENDING, "Priority");
  response.mutable_wait()->set_has_time_limit(true);
  const WhyWords words = WhyInWords(response);
  EXPECT_NE(words.summary.find("waits for higher-priority jobs"), std::string::npos);
  ASSERT_EQ(words.suggestions.size(), 1u);
  EXPECT_EQ(words.suggestions[0],
            "a shorter --time lets it backfill into gaps before reservations");
  // A job that waits for its victims to stop says so.
  response.mutable_wait()->set_preempting("preempting job 4; they stop by 13:50 at the latest");
  EXPECT_EQ(WhyInWords(response).blockers,
            std::vector<std::string>{"preempting job 4; they stop by 13:50 at the latest"});
}

TEST_F(WhyViewTest, AHoldNamesWhoMayReleaseIt) {
  v1::ExplainJobResponse response = Job(v1::JOB_PENDING, "JobHeldUser");
  response.mutable_job()->set_reason_detail("held by its owner; cohort release lifts it");
  WhyWords words = WhyInWords(response);
  EXPECT_EQ(words.summary, "Job 12_3 is held and will not start until it is released.");
  EXPECT_EQ(words.blockers, std::vector<std::string>{"held by its owner; cohort release lifts it"});
  EXPECT_EQ(words.suggestions, std::vector<std::string>{"cohort release 12_3"});
  response = Job(v1::JOB_PENDING, "JobHeldAdmin");
  EXPECT_TRUE(WhyInWords(response).suggestions.empty());
}

TEST_F(WhyViewTest, DependenciesAndLimitsSayWhatTheyWaitFor) {
  EXPECT_EQ(WhyInWords(Job(v1::JOB_PENDING, "Dependency")).summary,
            "Job 12_3 waits for its dependency.");
  const WhyWords never = WhyInWords(Job(v1::JOB_PENDING, "DependencyNeverSatisfied"));
  EXPECT_EQ(never.summary, "Job 12_3's dependency can never be satisfied; it will not start.");
  EXPECT_EQ(never.suggestions,
            std::vector<std::string>{"cancel it (cohort cancel 12_3) and submit again with a "
                                     "dependency that can hold"});
  const WhyWords limit = WhyInWords(Job(v1::JOB_PENDING, "QOSMaxJobsPerUserLimit"));
  EXPECT_EQ(limit.summary, "Job 12_3 waits for a limit (QOSMaxJobsPerUserLimit).");
  EXPECT_NE(limit.suggestions.at(0).find("another --qos"), std::string::npos);
  EXPECT_EQ(WhyInWords(Job(v1::JOB_PENDING, "JobArrayTaskLimit")).suggestions,
            std::vector<std::string>{"the next task starts when a running one ends"});
}

TEST_F(WhyViewTest, ARunningJobSaysWhereAndHowToStopItWhenPreempted) {
  v1::ExplainJobResponse response = Job(v1::JOB_RUNNING, "None");
  response.mutable_job()->set_nodes("node[01-04]");
  EXPECT_EQ(ExplainText(response, kNowMs),
            "Job 12_3 (train, user alice) is RUNNING.\nJob 12_3 is running on node[01-04].\n");
  response.mutable_job()->set_preempt_deadline_ms(kNowMs + 60'000);
  response.mutable_job()->set_reason_detail("preempted by job 20; it stops by 13:46");
  const WhyWords words = WhyInWords(response);
  EXPECT_EQ(words.blockers, std::vector<std::string>{"preempted by job 20; it stops by 13:46"});
  EXPECT_EQ(words.suggestions,
            std::vector<std::string>{
                "save a checkpoint and run cohort checkpoint-done 12_3 to stop at once"});
  v1::ExplainJobResponse ended = Job(v1::JOB_FAILED, "NonZeroExitCode");
  EXPECT_EQ(WhyInWords(ended).summary, "Job 12_3 is FAILED: NonZeroExitCode.");
}

TEST_F(WhyViewTest, ARepairedGangListsItsRepairsAndTheSparesLeft) {
  v1::ExplainJobResponse response = Job(v1::JOB_RUNNING, "None");
  response.mutable_job()->set_nodes("node[01,03-04]");
  response.mutable_job()->set_spare_nodes("node05");
  v1::Repair& repair = *response.mutable_job()->add_repairs();
  repair.set_time_ms(kNowMs - 60'000);
  repair.add_lost("node02");
  repair.add_replacement("node03");
  repair.add_node_ranks(1);
  repair.set_attempt(2);
  repair.set_restarted("every rank again as attempt 2");
  repair.set_reason("node node02 was lost: not responding for 30 s (NodeTimeout)");
  EXPECT_EQ(ExplainText(response, kNowMs),
            "Job 12_3 (train, user alice) is RUNNING.\nJob 12_3 is running on node[01,03-04].\n"
            "\n"
            "Gang repairs (spares held now: node05):\n"
            "  - 2024-05-01T13:44:00: node02 replaced by node03 (node rank 1); started every rank "
            "again as attempt 2; node node02 was lost: not responding for 30 s (NodeTimeout)\n");
}

TEST_F(WhyViewTest, JsonHasTheWordsAndTheFacts) {
  v1::ExplainJobResponse response = Blocked();
  const nlohmann::ordered_json unknown = ExplainToJson(response, kNowMs);
  EXPECT_EQ(unknown["job"]["display_id"], "12_3");
  EXPECT_EQ(unknown["blockers"].size(), 3u);
  EXPECT_EQ(unknown["suggestions"][2], "partition debug could start it now (-p debug)");
  EXPECT_TRUE(unknown["expected_start_ms"].is_null());
  EXPECT_EQ(unknown["pending_reason"], "Resources");
  EXPECT_EQ(unknown["wait"]["ahead_count"], 4);
  EXPECT_EQ(unknown["wait"]["ahead"][2].dump(),
            R"({"display_id":"11_2","priority":8000,"nodes":2})");
  EXPECT_EQ(unknown["wait"]["closest_leaves"][0]["fitting"], 12);
  EXPECT_EQ(unknown["sooner"].dump(),
            R"({"fewer_nodes":12,"without_switches":1,"partitions":["debug"]})");
  response.set_expected_start_ms(kNowMs + 5000);
  EXPECT_EQ(ExplainToJson(response, kNowMs)["expected_start_ms"], kNowMs + 5000);
  EXPECT_TRUE(ExplainToJson(Job(v1::JOB_RUNNING, "None"), kNowMs)["pending_reason"].is_null());
}

}  // namespace
}  // namespace cohort::cli
