// SPDX-License-Identifier: Apache-2.0
#include "engine/pass_triggers.h"

namespace cohort::engine {

std::string_view TriggerName(Trigger trigger) {
  switch (trigger) {
    case Trigger::kSubmitted:
      return "submitted";
    case Trigger::kReleased:
      return "released";
    case Trigger::kDependency:
      return "dependency";
    case Trigger::kEndedPending:
      return "ended_pending";
    case Trigger::kRequeued:
      return "requeued";
    case Trigger::kUpdated:
      return "updated";
    case Trigger::kHeld:
      return "held";
    case Trigger::kUnheld:
      return "unheld";
    case Trigger::kNodeUp:
      return "node_up";
    case Trigger::kNodeResumed:
      return "node_resumed";
    case Trigger::kPartitionUp:
      return "partition_up";
    case Trigger::kAccounts:
      return "accounts";
    case Trigger::kReservations:
      return "reservations";
    case Trigger::kSuspended:
      return "suspended";
    case Trigger::kSwitchWaitOver:
      return "switch_wait_over";
    case Trigger::kBeginTime:
      return "begin_time";
    case Trigger::kAging:
      return "aging";
    case Trigger::kRestored:
      return "restored";
  }
  return "unknown";
}

void PassTriggers::Note(Trigger trigger) {
  ++counts_[static_cast<std::size_t>(trigger)];
  pass_needed_ = true;
  // What a submission or a release changes, a pass of its own kind weighs
  // (docs/scheduling.md); anything else may change any job's fate.
  if (trigger != Trigger::kSubmitted && trigger != Trigger::kReleased) full_pass_needed_ = true;
}

void PassTriggers::Submitted(const Job& job) {
  NoteDependencies(job);
  submitted_.push_back(job.id);
  Note(Trigger::kSubmitted);
}

void PassTriggers::Released(const Job& job, NodeId node) {
  released_nodes_.push_back(node);
  if (job.array.job_id != 0) released_array_task_ = true;
  if (IsDependencyTarget(job)) {
    Note(Trigger::kDependency);
    return;
  }
  released_ = true;
  Note(Trigger::kReleased);
}

void PassTriggers::Started(const Job& job) {
  // Jobs that wait for this one to start (after:) may lie past where the
  // next release pass looks.
  if (IsDependencyTarget(job)) Note(Trigger::kDependency);
}

void PassTriggers::WakeAt(Millis at) { wake_at_ = std::min(wake_at_, at); }

void PassTriggers::Tick(Millis now) {
  if (now < wake_at_) return;
  wake_at_ = Millis::max();
  Note(Trigger::kBeginTime);
}

void PassTriggers::NoteDependencies(const Job& job) {
  for (const DependencyTerm& term : job.wait.dependency_left.terms) {
    if (term.type == DependencyType::kSingleton) {
      singleton_waits_ = true;
    } else {
      dependency_targets_.insert(term.job);
    }
  }
}

bool PassTriggers::IsDependencyTarget(const Job& job) const {
  return singleton_waits_ || dependency_targets_.contains(job.id) ||
         (job.array.job_id != 0 && dependency_targets_.contains(job.array.job_id));
}

void PassTriggers::PassBegun() {
  pass_needed_ = false;
  ForgetReleases();
  submitted_.clear();
}

void PassTriggers::ForgetDependencies() {
  dependency_targets_.clear();
  singleton_waits_ = false;
}

void PassTriggers::NothingToDo() {
  pass_needed_ = false;
  ForgetReleases();
}

void PassTriggers::ForgetReleases() {
  released_ = false;
  released_nodes_.clear();
  released_array_task_ = false;
}

}  // namespace cohort::engine
