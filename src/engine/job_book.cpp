// SPDX-License-Identifier: Apache-2.0
#include "engine/job_book.h"

#include <algorithm>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/engine/engine_types.h"
#include "engine/engine_support.h"

namespace cohort::engine {

Job* JobBook::Find(JobId id) {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const Job* JobBook::Find(JobId id) const {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

Job& JobBook::At(JobId id) {
  Job* job = Find(id);
  COHORT_CHECK(job != nullptr, "no such job in the book");
  return *job;
}

const Job& JobBook::At(JobId id) const {
  const Job* job = Find(id);
  COHORT_CHECK(job != nullptr, "no such job in the book");
  return *job;
}

Job& JobBook::Add(Job&& job, JobSubstate sub, Effects& effects) {
  const JobId id = job.id;
  COHORT_CHECK(IsValid({JobState::kPending, sub}), "a new job is pending");
  job.state.Set(JobState::kPending, StatusKey());
  job.sub.Set(sub, StatusKey());
  auto [it, inserted] = jobs_.emplace(id, std::move(job));
  COHORT_CHECK(inserted, "job id reused");
  Insert(it->second);
  effects.transitions.push_back({id, std::nullopt, StatusOf(it->second), std::nullopt});
  return it->second;
}

Job* JobBook::Restore(SavedJob&& saved) {
  next_id_ = std::max(next_id_, saved.job.id + 1);
  const JobId id = saved.job.id;
  auto [it, inserted] = jobs_.emplace(id, std::move(saved.job));
  if (!inserted) return nullptr;
  Job& job = it->second;
  job.state.Set(saved.status.state, StatusKey());
  job.sub.Set(IsValid(saved.status) ? saved.status.sub : JobSubstate::kNone, StatusKey());
  job.cache.share_slot = -1;  // numbered by this book
  Insert(it->second);
  if (it->second.array.task_id >= 0 && id != it->second.array.job_id) {
    array_tasks_[it->second.array.job_id].push_back(id);
  }
  return &it->second;
}

void JobBook::AddArrayTask(JobId array_id, JobId task) { array_tasks_[array_id].push_back(task); }

void JobBook::SetState(Job& job, JobStatus next, JobEvent event, Effects& effects) {
  const JobStatus now = StatusOf(job);
  if (now == next) return;
  COHORT_CHECK(IsValid(next), "a sub-state its state does not have");
  effects.transitions.push_back({job.id, now, next, event});
  job.sub.Set(next.sub, StatusKey());
  if (next.state == now.state) return;  // the indexes follow the state alone
  Unindex(job);
  job.state.Set(next.state, StatusKey());
  Insert(job);
}

void JobBook::EndSwitchWait(Job& job) {
  switch_waits_.erase(&job);
  job.gang.max_leaves.reset();
}

void JobBook::Insert(Job& job) {
  if (job.cache.share_slot < 0) {
    auto key = std::pair{job.request.account, job.request.user_name};
    auto [it, fresh] = share_slots_.try_emplace(key, static_cast<int>(share_owners_.size()));
    if (fresh) share_owners_.push_back(std::move(key));
    job.cache.share_slot = it->second;
  }
  if (job.state == JobState::kPending) {
    pending_.insert(&job);
    ++pending_shapes_[ShapeOf(job.gang)];
    if (job.gang.max_leaves && job.request.switches_wait.count() > 0) switch_waits_.insert(&job);
  } else if (IsActive(job)) {
    active_.insert(&job);
  } else {
    finished_.emplace(job.run.end_time, job.id);
  }
}

void JobBook::Unindex(Job& job) {
  if (job.state == JobState::kPending) {
    pending_.erase(&job);
    // Counted with the gang it was indexed with (Reindex indexes again when
    // it changes one; CheckIndexes compares).
    if (const auto shape = pending_shapes_.find(ShapeOf(job.gang));
        shape != pending_shapes_.end() && --shape->second == 0) {
      pending_shapes_.erase(shape);
    }
    switch_waits_.erase(&job);
  } else if (IsActive(job)) {
    active_.erase(&job);
  } else {
    finished_.erase({job.run.end_time, job.id});
  }
}

std::vector<JobId> JobBook::Lookup(const JobRef& ref) const {
  std::vector<JobId> ids;
  const auto tasks = array_tasks_.find(ref.job);
  const Job* record = Find(ref.job);
  if (ref.task >= 0) {
    if (tasks != array_tasks_.end()) {
      for (const JobId id : tasks->second) {
        if (At(id).array.task_id == ref.task) return {id};
      }
    }
    if (record != nullptr && record->array.job_id == ref.job &&
        (record->array.task_id == ref.task ||
         std::binary_search(record->array.pending.begin(), record->array.pending.end(),
                            ref.task))) {
      return {ref.job};
    }
    return ids;
  }
  if (record != nullptr) ids.push_back(ref.job);
  if (tasks != array_tasks_.end())
    ids.insert(ids.end(), tasks->second.begin(), tasks->second.end());
  return ids;
}

std::vector<JobId> JobBook::ForgetFinished(Millis now, Millis retention) {
  std::vector<JobId> forgotten;
  while (!finished_.empty() && now - finished_.begin()->first > retention) {
    const JobId id = finished_.begin()->second;
    finished_.erase(finished_.begin());
    const Job& job = At(id);
    if (job.array.job_id != 0 && job.array.job_id != id) {
      auto it = array_tasks_.find(job.array.job_id);
      if (it != array_tasks_.end()) {
        std::erase(it->second, id);
        if (it->second.empty()) array_tasks_.erase(it);
      }
    }
    jobs_.erase(id);
    forgotten.push_back(id);
  }
  return forgotten;
}

absl::Status JobBook::CheckIndexes() const {
  std::size_t indexed = 0;
  for (const auto& [id, job] : jobs_) {
    const bool in_pending = pending_.contains(&job);
    const bool in_active = active_.contains(&job);
    const bool in_finished = finished_.contains({job.run.end_time, id});
    const bool want_pending = job.state == JobState::kPending;
    const bool want_active = IsActive(job);
    if (in_pending != want_pending || in_active != want_active ||
        in_finished != (!want_pending && !want_active)) {
      return absl::InternalError(
          fmt::format("job {} ({}) is in the wrong state index", id, JobStateName(job.state)));
    }
    ++indexed;
  }
  if (indexed != pending_.size() + active_.size() + finished_.size()) {
    return absl::InternalError("a state index holds a job the engine no longer has");
  }
  std::map<GangShape, int> shapes;
  for (const Job* job : pending_) ++shapes[ShapeOf(job->gang)];
  if (shapes != pending_shapes_) {
    return absl::InternalError("the pending jobs' gang shapes are not those counted");
  }
  return absl::OkStatus();
}

const std::set<JobId>& JobBook::JobsOn(NodeId node) const {
  static const std::set<JobId> kNone;
  const auto index = static_cast<std::size_t>(node);
  return index < on_node_.size() ? on_node_[index] : kNone;
}

void JobBook::Holds(NodeId node, JobId job) {
  const auto index = static_cast<std::size_t>(node);
  if (index >= on_node_.size()) on_node_.resize(index + 1);
  on_node_[index].insert(job);
}

void JobBook::LetGo(NodeId node, JobId job) {
  const auto index = static_cast<std::size_t>(node);
  if (index < on_node_.size()) on_node_[index].erase(job);
}

}  // namespace cohort::engine
