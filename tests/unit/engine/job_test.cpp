// SPDX-License-Identifier: Apache-2.0
#include "cohort/engine/job.h"

#include <array>
#include <string>

#include <gtest/gtest.h>

namespace cohort {
namespace {

constexpr JobState kAllStates[] = {JobState::kPending,   JobState::kRunning, JobState::kCompleting,
                                   JobState::kCompleted, JobState::kFailed,  JobState::kCancelled,
                                   JobState::kTimeout,   JobState::kNodeFail};
constexpr JobSubstate kAllSubstates[] = {JobSubstate::kNone, JobSubstate::kHeldUser,
                                         JobSubstate::kHeldAdmin, JobSubstate::kPreempting,
                                         JobSubstate::kSuspended};

// Every status a job can have, and after each event (in JobEvent order) the
// status it moves to, or "-" where the event is ignored. Written out by
// hand, not derived from the table.
struct Row {
  JobStatus status;
  std::array<const char*, kJobEventCount> next;
};
constexpr const char* _ = "-";
const Row kExpected[] = {
    // Allocated Succeeded RankFailed LaunchFailed Cancelled TimeLimit NodeLost AllReleased
    // Preempted Requeued Invalidated HeldByUser HeldByOperator Released PreemptWarned
    // PreemptCalledOff Suspended Resumed
    {{JobState::kPending, JobSubstate::kNone},
     {"RUNNING", _, _, _, "CANCELLED", _, _, _, _, _, "FAILED", "PENDING/held_user",
      "PENDING/held_admin", _, _, _, _, _}},
    {{JobState::kPending, JobSubstate::kHeldUser},
     {_, _, _, _, "CANCELLED", _, _, _, _, _, "FAILED", _, "PENDING/held_admin", "PENDING", _, _, _,
      _}},
    {{JobState::kPending, JobSubstate::kHeldAdmin},
     {_, _, _, _, "CANCELLED", _, _, _, _, _, "FAILED", _, _, "PENDING", _, _, _, _}},
    {{JobState::kRunning, JobSubstate::kNone},
     {_, "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", _, _,
      "COMPLETING", _, _, _, _, "RUNNING/preempting", _, _, _}},
    {{JobState::kRunning, JobSubstate::kPreempting},
     {_, "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", _,
      "COMPLETING", "COMPLETING", _, _, _, _, _, "RUNNING", "RUNNING/suspended", _}},
    {{JobState::kRunning, JobSubstate::kSuspended},
     {_, "COMPLETING/suspended", "COMPLETING/suspended", "COMPLETING/suspended",
      "COMPLETING/suspended", _, "COMPLETING/suspended", _, _, "COMPLETING/suspended", _, _, _, _,
      _, _, _, "RUNNING"}},
    {{JobState::kCompleting, JobSubstate::kNone},
     {_, _, "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", "COMPLETING", _,
      _, _, _, _, _, _, _, _, _}},
    {{JobState::kCompleting, JobSubstate::kSuspended},
     {_, _, "COMPLETING/suspended", "COMPLETING/suspended", "COMPLETING/suspended",
      "COMPLETING/suspended", "COMPLETING/suspended", "COMPLETING/suspended", _, _, _, _, _, _, _,
      _, _, _}},
    {{JobState::kCompleted, JobSubstate::kNone},
     {_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _}},
    {{JobState::kFailed, JobSubstate::kNone},
     {_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _}},
    {{JobState::kCancelled, JobSubstate::kNone},
     {_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _}},
    {{JobState::kTimeout, JobSubstate::kNone},
     {_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _}},
    {{JobState::kNodeFail, JobSubstate::kNone},
     {_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _}},
};

// The whole table: every (status, event) pair against the expectations, and
// every (state, sub-state) pair no job can have refuses every event.
TEST(JobTransitionTest, EveryStatusAndEvent) {
  int valid = 0;
  for (const JobState state : kAllStates) {
    for (const JobSubstate sub : kAllSubstates) {
      const JobStatus status{state, sub};
      const Row* row = nullptr;
      for (const Row& r : kExpected) {
        if (r.status == status) row = &r;
      }
      EXPECT_EQ(IsValid(status), row != nullptr) << JobStatusName(status);
      if (row != nullptr) ++valid;
      for (int e = 0; e < kJobEventCount; ++e) {
        const auto event = static_cast<JobEvent>(e);
        const std::optional<JobStatus> next = Transition(status, event);
        const std::string got = next ? JobStatusName(*next) : "-";
        EXPECT_EQ(got, row != nullptr ? row->next[static_cast<std::size_t>(e)] : "-")
            << JobStatusName(status) << " + " << JobEventName(event);
      }
    }
  }
  EXPECT_EQ(valid, static_cast<int>(std::size(kExpected)));
}

TEST(JobTransitionTest, NamesOfStatusesAndEvents) {
  EXPECT_EQ(JobStatusName({JobState::kRunning, JobSubstate::kNone}), "RUNNING");
  EXPECT_EQ(JobStatusName({JobState::kPending, JobSubstate::kHeldAdmin}), "PENDING/held_admin");
  EXPECT_EQ(JobEventName(JobEvent::kPreemptCalledOff), "preempt_called_off");
  EXPECT_EQ(JobEventName(JobEvent::kResumed), "resumed");
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
