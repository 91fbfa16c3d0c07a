// SPDX-License-Identifier: Apache-2.0
#include "http/metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "controller/controller_test_support.h"

namespace cohort::controller {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  std::unique_ptr<ControllerState> state_ = testing::OneLeafState(2);
};

TEST_F(MetricsTest, CountsTransitionsAndGaugesTheEngineNow) {
  JobRequest request;
  request.name = "train";
  request.user_name = "alice";
  request.uid = 1000;
  request.nodes = 1;
  request.tasks_per_node = 1;
  Effects effects;
  ASSERT_TRUE(state_->engine.Submit(request, ControllerState::Now(), effects).ok());
  state_->engine.Schedule(ControllerState::Now(), effects);

  ControllerMetrics metrics;
  metrics.Count(effects.transitions);
  const JobStatus running{.state = JobState::kRunning, .sub = JobSubstate::kNone};
  const JobStatus preempting{.state = JobState::kRunning, .sub = JobSubstate::kPreempting};
  metrics.Count(std::vector<JobTransition>{
      {.job = 7, .from = JobStatus{}, .to = running, .event = JobEvent::kAllocated},
      {.job = 7,
       .from = JobStatus{.state = JobState::kCompleting, .sub = JobSubstate::kNone},
       .to = JobStatus{.state = JobState::kFailed, .sub = JobSubstate::kNone},
       .event = JobEvent::kAllReleased},
      {.job = 8, .from = running, .to = preempting, .event = JobEvent::kPreemptWarned},
      {.job = 8, .from = preempting, .to = JobStatus{}, .event = JobEvent::kPreempted},
  });
  metrics.Pass("full", std::chrono::milliseconds(2));

  const std::string text = metrics.Render(state_->engine, 1);
  // No agent has registered: the job waits, the nodes are UNKNOWN.
  EXPECT_NE(text.find("cohort_jobs{state=\"PENDING\",partition=\"all\",reason=\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cohort_nodes{partition=\"all\",state=\"UNKNOWN\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_jobs_submitted_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_jobs_started_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_jobs_ended_total{state=\"FAILED\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_preemptions_total{mode=\"REQUEUE\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_scheduling_pass_seconds_count{kind=\"full\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("cohort_agent_streams 1\n"), std::string::npos);
  EXPECT_EQ(text.find("job=\""), std::string::npos) << "no label names a job";
}

}  // namespace
}  // namespace cohort::controller
