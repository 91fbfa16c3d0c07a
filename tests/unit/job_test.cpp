// SPDX-License-Identifier: Apache-2.0
#include "cohort/job.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

constexpr JobState kAllStates[] = {JobState::kPending,   JobState::kRunning,  JobState::kCompleting,
                                   JobState::kCompleted, JobState::kFailed,   JobState::kCancelled,
                                   JobState::kTimeout,   JobState::kNodeFail};
constexpr JobEvent kAllEvents[] = {JobEvent::kAllocated,   JobEvent::kRanksSucceeded,
                                   JobEvent::kRankFailed,  JobEvent::kLaunchFailed,
                                   JobEvent::kCancelled,   JobEvent::kTimeLimit,
                                   JobEvent::kNodeLost,    JobEvent::kAllReleased,
                                   JobEvent::kPreempted,   JobEvent::kRequeued,
                                   JobEvent::kInvalidated};

// The whole table, written out: (state, event) -> next state or "-".
TEST(JobTransitionTest, EveryStateAndEvent) {
  const char* expected[kJobStateCount][kJobEventCount] = {
      // Alloc  Succeeded  RankFailed  LaunchFailed  Cancelled  TimeLimit  NodeLost  AllReleased
      // Preempted  Requeued  Invalidated
      {"RUNNING", "-", "-", "-", "CANCELLED", "-", "-", "-", "-", "-", "FAILED"},  // PENDING
      {"-", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "-",
       "COMPLETING", "COMPLETING", "-"},  // RUNNING
      {"-", "-", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING",
       "-", "-", "-"},  // COMPLETING
      {"-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
      {"-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
      {"-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
      {"-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
      {"-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
  };
  for (const JobState state : kAllStates) {
    for (const JobEvent event : kAllEvents) {
      const std::optional<JobState> next = Transition(state, event);
      const std::string got = next ? std::string(JobStateName(*next)) : "-";
      EXPECT_EQ(got, expected[static_cast<int>(state)][static_cast<int>(event)])
          << JobStateName(state) << " + event " << static_cast<int>(event);
    }
  }
}

TEST(JobTransitionTest, FinalStatesFollowTheCause) {
  EXPECT_EQ(FinalState(EndCause::kSuccess), JobState::kCompleted);
  EXPECT_EQ(FinalState(EndCause::kRankFailed), JobState::kFailed);
  EXPECT_EQ(FinalState(EndCause::kLaunchFailed), JobState::kFailed);
  EXPECT_EQ(FinalState(EndCause::kCancelled), JobState::kCancelled);
  EXPECT_EQ(FinalState(EndCause::kTimeLimit), JobState::kTimeout);
  EXPECT_EQ(FinalState(EndCause::kNodeLost), JobState::kNodeFail);
  EXPECT_EQ(FinalState(EndCause::kNodeLostRequeue), JobState::kPending);
  EXPECT_EQ(FinalState(EndCause::kPreemptRequeue), JobState::kPending);
  EXPECT_EQ(FinalState(EndCause::kRequeued), JobState::kPending);
  for (const JobState state : kAllStates) {
    EXPECT_EQ(IsFinished(state), static_cast<int>(state) >= static_cast<int>(JobState::kCompleted));
  }
}

}  // namespace
}  // namespace cohort
