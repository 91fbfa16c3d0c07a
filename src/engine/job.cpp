// SPDX-License-Identifier: Apache-2.0
#include "cohort/engine/job.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace cohort {
namespace {

// The statuses a job can have, one table row each, in this order.
constexpr std::array<JobStatus, 13> kStatuses = {{
    {JobState::kPending, JobSubstate::kNone},
    {JobState::kPending, JobSubstate::kHeldUser},
    {JobState::kPending, JobSubstate::kHeldAdmin},
    {JobState::kRunning, JobSubstate::kNone},
    {JobState::kRunning, JobSubstate::kPreempting},
    {JobState::kRunning, JobSubstate::kSuspended},
    {JobState::kCompleting, JobSubstate::kNone},
    {JobState::kCompleting, JobSubstate::kSuspended},
    {JobState::kCompleted, JobSubstate::kNone},
    {JobState::kFailed, JobSubstate::kNone},
    {JobState::kCancelled, JobSubstate::kNone},
    {JobState::kTimeout, JobSubstate::kNone},
    {JobState::kNodeFail, JobSubstate::kNone},
}};

constexpr std::optional<JobStatus> kNo = std::nullopt;  // the event is ignored there
constexpr JobStatus kPend{JobState::kPending, JobSubstate::kNone};
constexpr JobStatus kHeldU{JobState::kPending, JobSubstate::kHeldUser};
constexpr JobStatus kHeldA{JobState::kPending, JobSubstate::kHeldAdmin};
constexpr JobStatus kRun{JobState::kRunning, JobSubstate::kNone};
constexpr JobStatus kPreempt{JobState::kRunning, JobSubstate::kPreempting};
constexpr JobStatus kSusp{JobState::kRunning, JobSubstate::kSuspended};
constexpr JobStatus kStop{JobState::kCompleting, JobSubstate::kNone};
constexpr JobStatus kStopS{JobState::kCompleting, JobSubstate::kSuspended};
constexpr JobStatus kCanc{JobState::kCancelled, JobSubstate::kNone};
constexpr JobStatus kFail{JobState::kFailed, JobSubstate::kNone};

// One row per status of kStatuses, one column per JobEvent in declaration
// order. kAllReleased from kCompleting is resolved by FinalState(). A
// suspended job's time does not run (no kTimeLimit), and only a warned
// victim is preempted or suspended.
using Row = std::array<std::optional<JobStatus>, kJobEventCount>;
constexpr std::array<Row, kStatuses.size()> kTable = {{
    // Allocated Succeeded RankFailed LaunchFailed Cancelled TimeLimit NodeLost AllReleased
    // Preempted Requeued Invalidated | HeldByUser HeldByOperator Released PreemptWarned
    // PreemptCalledOff Suspended Resumed
    {kRun, kNo, kNo, kNo, kCanc, kNo, kNo, kNo, kNo, kNo, kFail,  //
     kHeldU, kHeldA, kNo, kNo, kNo, kNo, kNo},                    // pending
    {kNo, kNo, kNo, kNo, kCanc, kNo, kNo, kNo, kNo, kNo, kFail,   //
     kNo, kHeldA, kPend, kNo, kNo, kNo, kNo},                     // pending, held by its owner
    {kNo, kNo, kNo, kNo, kCanc, kNo, kNo, kNo, kNo, kNo, kFail,   //
     kNo, kNo, kPend, kNo, kNo, kNo, kNo},                        // pending, held by an operator
    {kNo, kStop, kStop, kStop, kStop, kStop, kStop, kNo, kNo, kStop, kNo,    //
     kNo, kNo, kNo, kPreempt, kNo, kNo, kNo},                                // running
    {kNo, kStop, kStop, kStop, kStop, kStop, kStop, kNo, kStop, kStop, kNo,  //
     kNo, kNo, kNo, kNo, kRun, kSusp, kNo},                                  // running, preempting
    {kNo, kStopS, kStopS, kStopS, kStopS, kNo, kStopS, kNo, kNo, kStopS, kNo,  //
     kNo, kNo, kNo, kNo, kNo, kNo, kRun},                                      // running, suspended
    {kNo, kNo, kStop, kStop, kStop, kStop, kStop, kStop, kNo, kNo, kNo,        //
     kNo, kNo, kNo, kNo, kNo, kNo, kNo},                                       // completing
    {kNo, kNo, kStopS, kStopS, kStopS, kStopS, kStopS, kStopS, kNo, kNo, kNo,  //
     kNo, kNo, kNo, kNo, kNo, kNo, kNo},  // completing, stopped while suspended
    {},
    {},
    {},
    {},
    {},  // the final states
}};

std::optional<std::size_t> RowOf(JobStatus status) {
  for (std::size_t i = 0; i < kStatuses.size(); ++i) {
    if (kStatuses[i] == status) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<JobStatus> Transition(JobStatus status, JobEvent event) {
  const std::optional<std::size_t> row = RowOf(status);
  if (!row) return std::nullopt;
  return kTable[*row][static_cast<std::size_t>(event)];
}

bool IsValid(JobStatus status) { return RowOf(status).has_value(); }

JobState FinalState(EndCause cause) {
  switch (cause) {
    case EndCause::kNone:
    case EndCause::kSuccess:
      return JobState::kCompleted;
    case EndCause::kRankFailed:
    case EndCause::kLaunchFailed:
      return JobState::kFailed;
    case EndCause::kCancelled:
      return JobState::kCancelled;
    case EndCause::kTimeLimit:
      return JobState::kTimeout;
    case EndCause::kNodeLost:
      return JobState::kNodeFail;
    case EndCause::kNodeLostRequeue:
    case EndCause::kPreemptRequeue:
    case EndCause::kRequeued:
      return JobState::kPending;
  }
  return JobState::kFailed;
}

EndCause CauseOf(JobEvent event) {
  switch (event) {
    case JobEvent::kRanksSucceeded:
      return EndCause::kSuccess;
    case JobEvent::kRankFailed:
      return EndCause::kRankFailed;
    case JobEvent::kLaunchFailed:
      return EndCause::kLaunchFailed;
    case JobEvent::kCancelled:
      return EndCause::kCancelled;
    case JobEvent::kTimeLimit:
      return EndCause::kTimeLimit;
    case JobEvent::kNodeLost:
      return EndCause::kNodeLost;
    case JobEvent::kPreempted:
      return EndCause::kPreemptRequeue;
    case JobEvent::kRequeued:
      return EndCause::kRequeued;
    case JobEvent::kInvalidated:
      return EndCause::kLaunchFailed;
    case JobEvent::kAllocated:
    case JobEvent::kAllReleased:
    case JobEvent::kHeldByUser:
    case JobEvent::kHeldByOperator:
    case JobEvent::kReleased:
    case JobEvent::kPreemptWarned:
    case JobEvent::kPreemptCalledOff:
    case JobEvent::kSuspended:
    case JobEvent::kResumed:
      return EndCause::kNone;
  }
  return EndCause::kNone;
}

std::string_view RestartPolicyName(RestartPolicy policy) {
  return policy == RestartPolicy::kStep ? "step" : "job";
}

std::optional<RestartPolicy> ParseRestartPolicy(std::string_view text) {
  if (text == "job") return RestartPolicy::kJob;
  if (text == "step") return RestartPolicy::kStep;
  return std::nullopt;
}

std::string_view JobStateName(JobState state) {
  static constexpr std::array<std::string_view, kJobStateCount> kNames = {
      "PENDING", "RUNNING",   "COMPLETING", "COMPLETED",
      "FAILED",  "CANCELLED", "TIMEOUT",    "NODE_FAIL"};
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
    "BeginTime",
    "PartitionDown",
    "PartitionInactive",
    "AssocGrpGRES",
    "AssocGrpCpuLimit",
    "AssocGrpNodeLimit",
    "AssocGrpJobsLimit",
    "AssocMaxJobsLimit",
    "AssocGrpGRESMinutes",
    "AssocGrpCPUMinutesLimit",
    "Reservation",
    "ReqNodeNotAvail, Reserved for maintenance",
    "QOSGrpGRES",
    "QOSGrpCpuLimit",
    "QOSGrpNodeLimit",
    "QOSGrpJobsLimit",
    "QOSGrpGRESMinutes",
    "QOSGrpCPUMinutesLimit",
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
      "allocated",        "ranks_succeeded", "rank_failed",    "launch_failed",
      "cancelled",        "time_limit",      "node_lost",      "all_released",
      "preempted",        "requeued",        "invalidated",    "held_by_user",
      "held_by_operator", "released",        "preempt_warned", "preempt_called_off",
      "suspended",        "resumed"};
  return kNames[static_cast<std::size_t>(event)];
}

std::string_view StepStateName(StepState state) {
  static constexpr std::array<std::string_view, 4> kNames = {"RUNNING", "COMPLETED", "FAILED",
                                                             "CANCELLED"};
  return kNames[static_cast<std::size_t>(state)];
}

std::string_view JobSubstateName(JobSubstate sub) {
  static constexpr std::array<std::string_view, kJobSubstateCount> kNames = {
      "none", "held_user", "held_admin", "preempting", "suspended"};
  return kNames[static_cast<std::size_t>(sub)];
}

std::string JobStatusName(JobStatus status) {
  if (status.sub == JobSubstate::kNone) return std::string(JobStateName(status.state));
  return fmt::format("{}/{}", JobStateName(status.state), JobSubstateName(status.sub));
}

std::string DisplayId(const Job& job) {
  if (job.array.task_id >= 0) return fmt::format("{}_{}", job.array.job_id, job.array.task_id);
  if (!job.array.pending.empty()) {
    return fmt::format("{}_[{}]", job.id,
                       FormatArrayTasks(job.array.pending, job.request.array.max_running));
  }
  return std::to_string(job.id);
}

bool AddRankUsage(TaskUsage& usage, const RankUsage& rank) {
  // Past these a figure is no report but a lie, and would overflow a sum:
  // a century of CPU time, a petabyte of memory, 2^31 ranks.
  constexpr std::int64_t kMostCpuMs = std::int64_t{1} << 52;
  constexpr std::int64_t kMostKb = std::int64_t{1} << 40;
  constexpr int kMostRanks = 1 << 30;
  const auto percent = [](int p) { return p >= 0 && p <= 100; };
  if (rank.max_rss_kb < 0 || rank.max_rss_kb > kMostKb || rank.cpu_ms < 0 ||
      rank.cpu_ms > kMostCpuMs || usage.ranks >= kMostRanks) {
    return false;
  }
  if (rank.gpu_measured &&
      (!percent(rank.gpu_util_ave) || !percent(rank.gpu_util_max) || rank.gpu_mem_max_mb < 0 ||
       rank.gpu_mem_max_mb > kMostKb || rank.gpu_mem_ave_mb < 0 || rank.gpu_mem_ave_mb > kMostKb)) {
    return false;
  }
  usage.max_rss_kb = std::max(usage.max_rss_kb, rank.max_rss_kb);
  usage.cpu_ms = std::min(usage.cpu_ms + rank.cpu_ms, kMostCpuMs);  // both ≤ 2^52: no overflow
  usage.max_cpu_ms = std::max(usage.max_cpu_ms, rank.cpu_ms);
  usage.rss_sum_kb += rank.max_rss_kb;  // ≤ 2^30 ranks × 2^40 kB: no overflow
  ++usage.ranks;
  if (rank.gpu_measured) {
    usage.gpu_util_max = std::max(usage.gpu_util_max, rank.gpu_util_max);
    usage.gpu_util_sum += rank.gpu_util_ave;
    ++usage.gpu_ranks;
    usage.gpu_mem_max_mb = std::max(usage.gpu_mem_max_mb, rank.gpu_mem_max_mb);
    usage.gpu_mem_sum_mb += rank.gpu_mem_ave_mb;
  }
  return true;
}

bool IsFinished(JobState state) {
  return state != JobState::kPending && state != JobState::kRunning &&
         state != JobState::kCompleting;
}

}  // namespace cohort
