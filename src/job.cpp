// SPDX-License-Identifier: Apache-2.0
#include "cohort/job.h"

#include <array>

#include <fmt/format.h>

namespace cohort {
namespace {

constexpr std::optional<JobState> kIgnored = std::nullopt;
constexpr auto kPending = JobState::kPending;
constexpr auto kRunning = JobState::kRunning;
constexpr auto kCompleting = JobState::kCompleting;

// The table, one row per state, one column per JobEvent in declaration
// order. kAllReleased from kCompleting is resolved by FinalState().
using Row = std::array<std::optional<JobState>, kJobEventCount>;
constexpr std::array<Row, kJobStateCount> kTable = {{
    //  Allocated, Succeeded,  RankFailed,  LaunchFailed, Cancelled,  TimeLimit,   NodeLost,
    //  AllReleased, Preempted, Requeued, Invalidated
    {kRunning, kIgnored, kIgnored, kIgnored, JobState::kCancelled, kIgnored, kIgnored, kIgnored,
     kIgnored, kIgnored, JobState::kFailed},  // pending
    {kIgnored, kCompleting, kCompleting, kCompleting, kCompleting, kCompleting, kCompleting,
     kIgnored, kCompleting, kCompleting, kIgnored},  // running
    {kIgnored, kIgnored, kCompleting, kCompleting, kCompleting, kCompleting, kCompleting,
     kCompleting, kIgnored, kIgnored, kIgnored},  // completing: the final state comes from the cause
    {},             // completed
    {},             // failed
    {},             // cancelled
    {},             // timeout
    {},             // node_fail
}};
}  // namespace

std::optional<JobState> Transition(JobState state, JobEvent event) {
  return kTable[static_cast<std::size_t>(state)][static_cast<std::size_t>(event)];
}

JobState FinalState(EndCause cause) {
  switch (cause) {
    case EndCause::kNone:
    case EndCause::kSuccess: return JobState::kCompleted;
    case EndCause::kRankFailed:
    case EndCause::kLaunchFailed: return JobState::kFailed;
    case EndCause::kCancelled: return JobState::kCancelled;
    case EndCause::kTimeLimit: return JobState::kTimeout;
    case EndCause::kNodeLost: return JobState::kNodeFail;
    case EndCause::kNodeLostRequeue:
    case EndCause::kPreemptRequeue:
    case EndCause::kRequeued: return kPending;
  }
  return JobState::kFailed;
}

EndCause CauseOf(JobEvent event) {
  switch (event) {
    case JobEvent::kRanksSucceeded: return EndCause::kSuccess;
    case JobEvent::kRankFailed: return EndCause::kRankFailed;
    case JobEvent::kLaunchFailed: return EndCause::kLaunchFailed;
    case JobEvent::kCancelled: return EndCause::kCancelled;
    case JobEvent::kTimeLimit: return EndCause::kTimeLimit;
    case JobEvent::kNodeLost: return EndCause::kNodeLost;
    case JobEvent::kPreempted: return EndCause::kPreemptRequeue;
    case JobEvent::kRequeued: return EndCause::kRequeued;
    case JobEvent::kInvalidated: return EndCause::kLaunchFailed;
    case JobEvent::kAllocated:
    case JobEvent::kAllReleased: return EndCause::kNone;
  }
  return EndCause::kNone;
}

std::string_view JobStateName(JobState state) {
  static constexpr std::array<std::string_view, kJobStateCount> kNames = {
      "PENDING", "RUNNING", "COMPLETING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"};
  return kNames[static_cast<std::size_t>(state)];
}

namespace {

constexpr std::array<std::string_view, kPendingReasonCount> kPendingReasonNames = {
    "None",
    "Resources",
    "Priority",
    "ReqNodeNotAvail",
    "Dependency",
    "DependencyNeverSatisfied",
    "JobHeldUser",
    "JobHeldAdmin",
    "QOSMaxJobsPerUserLimit",
    "QOSMaxGpusPerUserLimit",
    "QOSMaxGpusPerAccountLimit",
    "JobArrayTaskLimit",
    "Requeued",
};

}  // namespace

std::string_view PendingReasonName(PendingReason reason) {
  return kPendingReasonNames[static_cast<std::size_t>(reason)];
}

std::optional<PendingReason> ParsePendingReason(std::string_view name) {
  for (std::size_t i = 0; i < kPendingReasonNames.size(); ++i) {
    if (kPendingReasonNames[i] == name) return static_cast<PendingReason>(i);
  }
  return std::nullopt;
}

std::string_view JobEventName(JobEvent event) {
  static constexpr std::array<std::string_view, kJobEventCount> kNames = {
      "allocated", "ranks_succeeded", "rank_failed", "launch_failed", "cancelled", "time_limit",
      "node_lost", "all_released", "preempted", "requeued", "invalidated"};
  return kNames[static_cast<std::size_t>(event)];
}

std::string DisplayId(const Job& job) {
  if (job.array_task_id >= 0) return fmt::format("{}_{}", job.array_job_id, job.array_task_id);
  if (!job.array_pending.empty()) {
    return fmt::format("{}_[{}]", job.id,
                       FormatArrayTasks(job.array_pending, job.request.array.max_running));
  }
  return std::to_string(job.id);
}

bool IsFinished(JobState state) {
  return state != kPending && state != kRunning && state != kCompleting;
}

}  // namespace cohort
