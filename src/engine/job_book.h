// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "cohort/alloc/reservation_timeline.h"
#include "cohort/engine/job.h"

namespace cohort {
struct Effects;
struct JobRef;
struct SavedJob;
}  // namespace cohort

namespace cohort::engine {

using alloc::NodeId;

/// Every job the engine holds, and the indexes that follow each job's state:
/// by state (so that ticks and passes cost what is pending or running, not
/// everything still in memory), the pending jobs' gang shapes, the arrays'
/// tasks, the (account, user) slots of fair share and the jobs on each node. A job changes state
/// only through SetState, and enters the book only through Add or Restore:
/// the indexes cannot drift from the jobs. Pointers to jobs stay valid until
/// the job is forgotten (std::map nodes do not move).
class JobBook {
 public:
  struct ById {
    using is_transparent = void;
    bool operator()(const Job* a, const Job* b) const { return a->id < b->id; }
  };
  using Index = absl::btree_set<Job*, ById>;

  [[nodiscard]] Job* Find(JobId id);
  [[nodiscard]] const Job* Find(JobId id) const;
  /// The job of that id, which must exist (COHORT_CHECK).
  [[nodiscard]] Job& At(JobId id);
  [[nodiscard]] const Job& At(JobId id) const;
  [[nodiscard]] const std::map<JobId, Job>& All() const { return jobs_; }

  /// The id the next new job gets, and taking it.
  [[nodiscard]] JobId NextId() const { return next_id_; }
  JobId TakeId() { return next_id_++; }
  /// Restore: ids below `next` are taken.
  void ReserveIdsBelow(JobId next) { next_id_ = std::max(next_id_, next); }

  /// Adds a new job under its id (which must be fresh), pending with `sub`
  /// (kNone, or kHeldUser for a job submitted held), indexes it and reports
  /// it in `effects`.
  Job& Add(Job&& job, JobSubstate sub, Effects& effects);
  /// Adds a saved job in the status it was saved in (a status no job can
  /// have becomes the state alone); null when its id is already taken (the
  /// first wins).
  Job* Restore(SavedJob&& saved);
  /// Records an array task split off `array_id` (Lookup finds it by task).
  void AddArrayTask(JobId array_id, JobId task);

  /// The one way a job's state or sub-state changes: moves it between the
  /// indexes and reports the transition, with the event of job.h's table
  /// that caused it.
  void SetState(Job& job, JobStatus next, JobEvent event, Effects& effects);
  /// Changes what a pending job's indexes are keyed on (its gang): `change`
  /// runs with the job out of the indexes.
  template <typename Change>
  void Reindex(Job& job, Change change) {
    Unindex(job);
    change(job);
    Insert(job);
  }
  /// --switches=N@wait has run out: the job takes any leaves from now on.
  void EndSwitchWait(Job& job);

  /// The jobs that hold `node`: started there and not yet released from it.
  [[nodiscard]] const std::set<JobId>& JobsOn(NodeId node) const;
  /// `job` holds `node` now, or holds it no more.
  void Holds(NodeId node, JobId job);
  void LetGo(NodeId node, JobId job);

  [[nodiscard]] const Index& Pending() const { return pending_; }
  /// Running or completing (suspended too).
  [[nodiscard]] const Index& Active() const { return active_; }
  /// Pending jobs whose --switches=N@wait is still counting.
  [[nodiscard]] const Index& SwitchWaits() const { return switch_waits_; }
  /// How many pending jobs have each gang shape.
  [[nodiscard]] const std::map<GangShape, int>& PendingShapes() const { return pending_shapes_; }
  /// (account, user) by Job::cache.share_slot.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& ShareOwners() const {
    return share_owners_;
  }

  /// The jobs a reference names now: an array's created tasks and its
  /// record; empty when none.
  [[nodiscard]] std::vector<JobId> Lookup(const JobRef& ref) const;

  /// Forgets the jobs that finished more than `retention` before `now`;
  /// returns their ids.
  std::vector<JobId> ForgetFinished(Millis now, Millis retention);

  /// Internal when a job is not in the index of its state, an index holds a
  /// job the book no longer has, or the counted shapes disagree.
  [[nodiscard]] absl::Status CheckIndexes() const;

 private:
  void Insert(Job& job);
  void Unindex(Job& job);

  std::map<JobId, Job> jobs_;
  JobId next_id_ = 1;
  Index pending_;
  Index active_;
  Index switch_waits_;
  /// Finished jobs by end time, for forgetting them after their retention.
  std::set<std::pair<Millis, JobId>> finished_;
  /// Arrays: the ids of each array's created tasks (the record not included).
  std::map<JobId, std::vector<JobId>> array_tasks_;
  std::map<GangShape, int> pending_shapes_;
  std::map<std::pair<std::string, std::string>, int> share_slots_;
  std::vector<std::pair<std::string, std::string>> share_owners_;
  /// By node: the jobs holding it (grown to the highest node held).
  std::vector<std::set<JobId>> on_node_;
};

}  // namespace cohort::engine
