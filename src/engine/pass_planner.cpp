// SPDX-License-Identifier: Apache-2.0
#include "engine/pass_planner.h"

#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "cohort/alloc/placement_check.h"
#include "cohort/engine/engine_types.h"
#include "cohort/fmt_absl.h"
#include "engine/admission.h"
#include "engine/engine_support.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/preemption.h"
#include "engine/prioritizer.h"

namespace cohort::engine {
namespace {

// The detail of a job that waits for Priority: one ahead of it waits too.
constexpr std::string_view kWaitingBehind = "waiting behind higher-priority jobs of the partition";

}  // namespace

void PassPlanner::Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects) {
  preemption_.Started(job.id);  // a preemptor's plan is done
  life_.Start(job, placement, now, effects);
}

bool PassPlanner::PlacementHolds(Job& job, const alloc::Placement& placement, Effects& effects) {
  const absl::StatusOr<alloc::PlacementReport> report =
      alloc::CheckPlacement(allocator_.Topology(), job.gang, placement.grants);
  if (report.ok()) return true;
  ForgetPlan(job);
  Lifecycle::SetReason(job, PendingReason::kResources,
                       fmt::format("the placement found broke a rule and was not used (a bug; "
                                   "please report it): {}",
                                   report.status().message()),
                       effects);
  return false;
}

void PassPlanner::Tick(Millis now) {
  if (!book_.Pending().empty() && now - last_full_pass_ >= kFullPassEvery) {
    triggers_.Note(Trigger::kAging);
  }
  triggers_.Tick(now);
}

bool PassPlanner::SubmissionPass(Millis now, Effects& effects, bool past_releases) {
  if ((triggers_.AnyReleased() && !past_releases) || triggers_.FullPassNeeded()) return false;
  if (admission_.ChecksMayWait()) return false;
  std::vector<QueueKey> fresh;
  for (const JobId id : triggers_.SubmittedJobs()) {
    Job* job = book_.Find(id);
    if (job != nullptr && job->state == JobState::kPending) fresh.push_back(QueueKey::Of(*job));
  }
  std::sort(fresh.begin(), fresh.end());
  for (const QueueKey& key : fresh) {
    const Job& job = *key.job;
    // Holds, dependencies and arrays take the full pass's rules.
    if (IsHeld(job) || !job.wait.dependency_left.terms.empty() || !job.array.pending.empty() ||
        job.request.begin > now || job.request.deadline.count() > 0) {
      return false;
    }
    // A job ahead of its partition's waiting job may start, or wait first
    // and need a reservation or victims: the full pass decides.
    const auto blocked = last_blocked_.find(job.gang.partition.value_or(-1));
    if (blocked == last_blocked_.end() || key < blocked->second) return false;
  }
  // Nothing was freed since the last full pass that a job waiting before
  // these could use, and every new job is behind a waiting one: a new job
  // starts only as backfill, where it delays none of the reservations that
  // pass made; the other jobs' fate is unchanged.
  triggers_.PassBegun();
  // They join the ordered part of the queue that release passes walk.
  const std::size_t kept = last_order_.size();
  for (const QueueKey& key : fresh) {
    last_order_.push_back(key);
    last_order_.back().job = nullptr;
  }
  std::inplace_merge(last_order_.begin(), last_order_.begin() + static_cast<std::ptrdiff_t>(kept),
                     last_order_.end());
  for (const QueueKey& key : fresh) {
    Job& job = *key.job;
    alloc::GangRequest gang = job.gang;
    const std::vector<NodeId> reserved = ReservedNodes(last_reservations_, now, job);
    gang.excluded_nodes.insert(gang.excluded_nodes.end(), reserved.begin(), reserved.end());
    const std::vector<NodeId> may_fit = NodesThatMayFit(gang, pool_);
    if (static_cast<int>(may_fit.size()) >= gang.nodes) {
      const alloc::PlacementResult result =
          allocator_.Place(gang, pool_, alloc::GangAllocator::Classify::kNo, &may_fit);
      if (result.outcome == alloc::Outcome::kPlaced) {
        if (PlacementHolds(job, result.placement, effects) &&
            life_.ImexChannelsFree(job, effects)) {
          Start(job, result.placement, now, effects);
        }
        continue;
      }
    }
    ForgetPlan(job);
    Lifecycle::SetReason(job, PendingReason::kPriority, kWaitingBehind, effects);
  }
  return true;
}

bool PassPlanner::ReleaseCannotMatter() const {
  if (!triggers_.AnyReleased() || triggers_.FullPassNeeded() || preemption_.HasPlans() ||
      triggers_.ReleasedArrayTask() || admission_.ChecksMayWait()) {
    return false;
  }
  if (std::any_of(book_.Active().begin(), book_.Active().end(),
                  [](const Job* job) { return IsSuspended(*job); })) {
    return false;
  }
  // The shapes of the jobs submitted since the last pass, not counted: a
  // sweep's next job may fit where its last one ended.
  std::map<GangShape, int> fresh;
  for (const JobId id : triggers_.SubmittedJobs()) {
    const Job* job = book_.Find(id);
    if (job != nullptr && job->state == JobState::kPending) ++fresh[ShapeOf(job->gang)];
  }
  for (const auto& [shape, jobs] : book_.PendingShapes()) {
    const auto new_ones = fresh.find(shape);
    if (new_ones != fresh.end() && new_ones->second >= jobs) continue;
    for (const NodeId node : triggers_.ReleasedNodes()) {
      if (MayFitOneNode(shape, pool_.Capacity(node), pool_.Free(node))) return false;
    }
  }
  return true;
}

void PassPlanner::Schedule(Millis now, Effects& effects) {
  // A job that ends on a node the waiting jobs cannot use (the CPUs a GPU
  // job leaves, say) costs no walk of the queue: at 100,000 jobs a release
  // pass plans BackfillDepth reservations again, 10-20 ms.
  const bool releases_cannot_matter = ReleaseCannotMatter();
  if (releases_cannot_matter && triggers_.SubmittedJobs().empty()) {
    triggers_.NothingToDo();
    last_pass_kind_ = "idle";
    return;
  }
  if (SubmissionPass(now, effects, releases_cannot_matter)) {
    last_pass_kind_ = "submission";
    return;
  }
  if (ReleasePass(now, effects)) return;
  FullPass(now, effects);
}

void PassPlanner::BeginPass(PassState& pass, Millis now, Effects& effects) {
  triggers_.PassBegun();
  last_blocked_.clear();
  priority_.ChargeActive(book_, now);
  preemption_.ResumeSuspended(now, effects);
  pass.now = now;
  pass.reserved_from.assign(static_cast<std::size_t>(pool_.NodeCount()), Millis::max());
  // Operators' reservations hold their nodes from their start: waiting jobs
  // plan around them.
  for (const AdvanceReservation& r : reservations_.All()) {
    for (const NodeId n : r.nodes) {
      Millis& from = pass.reserved_from[static_cast<std::size_t>(n)];
      from = std::min(from, std::max(r.start, now));
    }
  }
  pass.counts.checks_may_wait = admission_.ChecksMayWait();
  if (admission_.AccountLimits().Active()) {
    pass.counts.quotas = &admission_.AccountLimits();
    pass.counts.now = now;
    admission_.AccountLimits().Begin(pass.counts.quota, now);
  }
  for (const Job* job : book_.Active()) pass.counts.Count(*job, 1);
  preemption_.Review(pass.preemptors, now, effects);
}

void PassPlanner::Take(const QueueKey& key, PassState& pass, Millis now, Effects& effects) {
  Job& job = *key.job;
  if (job.state != JobState::kPending) return;
  if (!admission_.Eligible(job, pass.counts, now, effects)) return;
  const alloc::PartitionId partition = job.gang.partition.value_or(-1);
  const bool behind = pass.blocked.contains(partition);
  if (behind && pass.backfill_tried >= config_.backfill_depth) {
    Lifecycle::SetReason(job, PendingReason::kPriority, kWaitingBehind, effects);
    ForgetPlan(job);
    return;
  }
  std::vector<NodeId> held_off;
  bool started = false;
  while (true) {
    alloc::GangRequest gang = job.gang;
    const std::vector<NodeId> reserved = ReservedNodes(pass.reservations, now, job);
    gang.excluded_nodes.insert(gang.excluded_nodes.end(), reserved.begin(), reserved.end());
    // Operators' reservations come on top of the backfill's.
    const alloc::GangRequest without_held_off = gang;
    held_off.clear();
    const AdvanceReservation* first_holding = HeldOff(job, now, held_off);
    gang.excluded_nodes.insert(gang.excluded_nodes.end(), held_off.begin(), held_off.end());
    if (behind) ++pass.backfill_tried;
    // Behind a waiting job only a placement matters, not why none exists:
    // skip the allocator when too few nodes could take one node of the gang.
    alloc::PlacementResult result;
    if (!behind) {
      result = allocator_.Place(gang, pool_);
    } else if (const std::vector<NodeId>& may_fit = pass.MayFitNodes(gang, pool_);
               static_cast<int>(may_fit.size()) < gang.nodes) {
      result.outcome = alloc::Outcome::kBusy;
    } else {
      result = allocator_.Place(gang, pool_, alloc::GangAllocator::Classify::kNo, &may_fit);
    }
    if (result.outcome == alloc::Outcome::kInfeasible && (!reserved.empty() || !held_off.empty())) {
      result.outcome = alloc::Outcome::kBusy;  // reservations are in its way, not the cluster
      result.reason = "the free nodes are reserved for higher-priority jobs";
    }
    if (result.outcome == alloc::Outcome::kPlaced &&
        (!PlacementHolds(job, result.placement, effects) ||
         !life_.ImexChannelsFree(job, effects))) {
      break;
    }
    if (result.outcome == alloc::Outcome::kPlaced) {
      Job& target = job.array.pending.empty() ? job : life_.SplitTask(job, now, effects);
      Start(target, result.placement, now, effects);
      pass.may_fit.clear();
      if (pass.shadow) pass.shadow->Commit(result.placement.grants);
      if (pass.timeline) {
        for (const alloc::NodeGrant& g : result.placement.grants)
          pass.timeline->NodeChanged(g.node);
      }
      pass.counts.Count(target, 1);
      started = true;
      if (job.state == JobState::kPending && !job.array.pending.empty() &&
          admission_.Eligible(job, pass.counts, now, effects)) {
        continue;  // the array's next task
      }
      break;
    }
    if (started) break;
    if (result.outcome == alloc::Outcome::kInfeasible) {
      Lifecycle::SetReason(job, PendingReason::kReqNodeNotAvail, result.reason, effects);
      break;
    }
    std::pair<PendingReason, std::string> held_reason;
    const bool held_by_reservation =
        first_holding != nullptr &&
        ReservationIsTheReason(job, without_held_off, *first_holding, now, held_reason);
    // Victims keep their IMEX channels while they stop (and a suspended
    // one for good): no preemption for a job the channels free now cannot serve.
    const bool channels = life_.Imex().FreeCount() >= life_.ImexChannelsNeeded(job);
    const bool chose = !pass.preemptors.contains(job.id) && !behind && channels &&
                       !held_by_reservation && preemption_.TryPreempt(job, held_off, now, effects);
    if (chose) {
      // Victims without grace time stopped (or were suspended) already.
      pass.may_fit.clear();
      pass.shadow.reset();
      pass.timeline.reset();
    }
    const bool preempting = pass.preemptors.contains(job.id) || chose;
    if (preempting) {
      pass.preemptors.insert(job.id);
      // The victims' nodes are the preemptor's: nothing else may take
      // them as they free.
      if (const std::vector<NodeId>* plan = preemption_.PlanOf(job.id); plan != nullptr) {
        job.cache.planned_nodes = *plan;
        pass.Reserve(Reservation{job.id, now, *plan});
      }
    } else {
      // The first BackfillDepth waiting jobs get a reservation.
      std::optional<Reservation> r;
      if (static_cast<int>(pass.reservations.size()) < config_.backfill_depth) {
        r = PlanReservation(pool_, book_, allocator_, job, pass, now);
      }
      if (r) {
        job.cache.expected_start = r->start;
        job.cache.planned_nodes = r->nodes;
        pass.Reserve(std::move(*r));
      } else {
        ForgetPlan(job);
      }
      if (held_by_reservation) {
        Lifecycle::SetReason(job, held_reason.first, held_reason.second, effects);
      } else {
        Lifecycle::SetReason(job, behind ? PendingReason::kPriority : PendingReason::kResources,
                             behind ? kWaitingBehind : std::string_view(result.reason), effects);
      }
    }
    pass.blocked.insert(partition);
    if (!last_blocked_.contains(partition)) {
      QueueKey first = QueueKey::Of(job);
      first.job = nullptr;  // kept past this pass: the order only
      last_blocked_.emplace(partition, first);
    }
    break;
  }
}

const AdvanceReservation* PassPlanner::HeldOff(const Job& job, Millis now,
                                               std::vector<NodeId>& out) const {
  if (reservations_.Empty()) return nullptr;
  const Millis end = job.time_limit == kUnlimited ? Millis::max() : now + ToMillis(job.time_limit);
  const AdvanceReservation* first = reservations_.Blocked(job, now, end, out);
  if (const AdvanceReservation* own = reservations_.Find(job.request.reservation);
      own != nullptr && (own->flags & kResvFlex) == 0) {
    for (NodeId n = 0; n < pool_.NodeCount(); ++n) {
      if (!std::binary_search(own->nodes.begin(), own->nodes.end(), n)) out.push_back(n);
    }
  }
  return first;
}

bool PassPlanner::ReservationIsTheReason(const Job& job, const alloc::GangRequest& without,
                                         const AdvanceReservation& first, Millis now,
                                         std::pair<PendingReason, std::string>& reason) {
  if (allocator_.Place(without, pool_).outcome != alloc::Outcome::kPlaced) return false;
  const bool maintenance = (first.flags & kResvMaint) != 0;
  reason.first = maintenance ? PendingReason::kReservedForMaintenance : PendingReason::kResources;
  const auto in = [&](Millis at) {
    return FormatSlurmTime(std::chrono::duration_cast<std::chrono::seconds>(
        std::max(at - now, Millis(0)) + Millis(999)));
  };
  reason.second = fmt::format(
      "reservation {}{} holds {} {}, for {}; the job needs those nodes", first.name,
      maintenance ? " (MAINT)" : "", NodeNames(topology_, first.nodes),
      first.start <= now ? std::string("now")
                         : fmt::format("from {} (in {})", Hms(first.start), in(first.start)),
      FormatSlurmTime(std::chrono::duration_cast<std::chrono::seconds>(first.end - first.start)));
  // The counterfactual: a time limit that ends before the first of them
  // starts, if the job then fits around the reservations active now.
  const Millis before = first.start - now;
  if (before >= std::chrono::minutes(1)) {
    const auto limit = std::chrono::floor<std::chrono::minutes>(before);
    alloc::GangRequest shorter = without;
    reservations_.Blocked(job, now, now + limit, shorter.excluded_nodes);
    if (allocator_.Place(shorter, pool_).outcome == alloc::Outcome::kPlaced) {
      reason.second += fmt::format(
          "; with its time limit {} it would run into that window; with --time={} or less it "
          "starts now",
          FormatSlurmTime(job.time_limit),
          FormatSlurmTime(std::chrono::duration_cast<std::chrono::seconds>(limit)));
    }
  }
  return true;
}

void PassPlanner::TakeInOrder(const QueueKey& key, PassState& pass, Millis now, Effects& effects) {
  const bool was_blocked = pass.blocked.contains(key.partition);
  std::size_t& in_partition = pass.left[key.partition];
  --in_partition;
  if (!was_blocked) --pass.open;
  Take(key, pass, now, effects);
  if (!was_blocked && pass.blocked.contains(key.partition)) pass.open -= in_partition;
}

void PassPlanner::FullPass(Millis now, Effects& effects) {
  last_pass_kind_ = "full";
  triggers_.FullPassBegun();
  last_full_pass_ = now;
  PassState pass;
  BeginPass(pass, now, effects);
  // The queue order's priorities, with each (account, user)'s fair share computed once.
  std::vector<QueueKey> keys;
  keys.reserve(book_.Pending().size());
  triggers_.ForgetDependencies();
  std::vector<Job*> by_id(book_.Pending().begin(), book_.Pending().end());
  // Ranked a batch at a time, and keyed while the batch's jobs are still in
  // the cache: at 100,000 jobs a second walk over them cost 2-3 ms.
  constexpr std::size_t kBatch = 256;
  std::vector<double> shares(book_.ShareOwners().size(), -1);
  for (std::size_t first = 0; first < by_id.size(); first += kBatch) {
    const std::span<Job* const> batch =
        std::span<Job* const>(by_id).subspan(first, std::min(kBatch, by_id.size() - first));
    priority_.Rank(batch, book_, now, shares);
    for (Job* job : batch) {
      keys.push_back(QueueKey::Of(*job));
      triggers_.NoteDependencies(*job);
    }
  }
  // The queue matters in order only until every partition with jobs left
  // waits (its first job blocked) and the backfill depth is spent: a heap
  // gives it in order that far, and the jobs after it, which only learn
  // that they wait for Priority, go in id order. No job starts then, so the
  // order cannot change what they learn.
  const auto later = [](const QueueKey& a, const QueueKey& b) { return b < a; };
  std::make_heap(keys.begin(), keys.end(), later);
  pass.CountKeys(keys);
  std::size_t heap_end = keys.size();
  while (heap_end > 0 && (pass.open > 0 || pass.backfill_tried < config_.backfill_depth)) {
    std::pop_heap(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(heap_end), later);
    const QueueKey& key = keys[--heap_end];
    TakeInOrder(key, pass, now, effects);
  }
  // The rest in id order, which is about the order of their memory: in the
  // heap's order each job was a cache miss, and they are most of a long
  // queue (at 100,000 jobs 25 ms, now 6).
  std::vector<JobId> taken;
  taken.reserve(keys.size() - heap_end);
  for (std::size_t i = heap_end; i < keys.size(); ++i) taken.push_back(keys[i].id);
  std::sort(taken.begin(), taken.end());
  auto next_taken = taken.begin();
  for (Job* job : by_id) {
    while (next_taken != taken.end() && *next_taken < job->id) ++next_taken;
    if (next_taken != taken.end() && *next_taken == job->id) continue;
    Take(QueueKey::Of(*job), pass, now, effects);
  }
  // What a release pass starts from: the part of the queue taken in order.
  last_order_.assign(keys.rbegin(), keys.rend() - static_cast<std::ptrdiff_t>(heap_end));
  for (QueueKey& key : last_order_) key.job = nullptr;
  last_unordered_.clear();
  for (std::size_t i = 0; i < heap_end; ++i) last_unordered_.insert(keys[i].partition);
  last_order_complete_ = heap_end == 0;
  last_reservations_ = std::move(pass.reservations);
}

bool PassPlanner::ReleasePass(Millis now, Effects& effects) {
  if (!triggers_.AnyReleased() || triggers_.FullPassNeeded()) return false;
  if (!last_order_complete_ && last_order_.empty()) return false;
  // The part of the queue the last full pass took in order, as it ordered
  // it, with the new jobs merged in at their priority now.
  std::vector<QueueKey> keys;
  keys.reserve(last_order_.size() + triggers_.SubmittedJobs().size());
  for (const QueueKey& stored : last_order_) {
    Job* job = book_.Find(stored.id);
    if (job == nullptr || job->state != JobState::kPending) continue;
    QueueKey key = stored;
    key.job = job;
    keys.push_back(key);
  }
  const std::size_t kept = keys.size();
  std::vector<Job*> fresh;
  for (const JobId id : triggers_.SubmittedJobs()) {
    Job* job = book_.Find(id);
    if (job != nullptr && job->state == JobState::kPending) fresh.push_back(job);
  }
  priority_.Rank(fresh, book_, now);
  for (Job* job : fresh) keys.push_back(QueueKey::Of(*job));
  std::sort(keys.begin() + static_cast<std::ptrdiff_t>(kept), keys.end());
  std::inplace_merge(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(kept), keys.end());
  // Past the last ordered key lie jobs that pass left unordered: reaching
  // it before the queue settles (every partition waits, the depth is
  // spent) needs a full pass.
  const QueueKey* boundary = last_order_complete_ ? nullptr : &last_order_.back();
  PassState pass;
  BeginPass(pass, now, effects);
  pass.CountKeys(keys);
  const auto settled = [&] {
    if (pass.open > 0 || pass.backfill_tried < config_.backfill_depth) return false;
    return std::all_of(last_unordered_.begin(), last_unordered_.end(),
                       [&](alloc::PartitionId p) { return pass.blocked.contains(p); });
  };
  std::size_t next = 0;
  for (; next < keys.size() && !settled(); ++next) {
    const QueueKey& key = keys[next];
    if (boundary != nullptr && *boundary < key) break;
    TakeInOrder(key, pass, now, effects);
  }
  if (!settled() && boundary != nullptr) {
    FullPass(now, effects);
    last_pass_kind_ = "release-full";
    return true;
  }
  last_pass_kind_ = "release";
  for (std::size_t i = next; i < keys.size(); ++i) Take(keys[i], pass, now, effects);
  for (QueueKey& key : keys) key.job = nullptr;
  last_order_ = std::move(keys);
  last_reservations_ = std::move(pass.reservations);
  return true;
}

// ------------------------------------------------------------- references and actions

std::vector<JobId> PassPlanner::PendingOrder() const {
  std::vector<QueueKey> keys;
  keys.reserve(book_.Pending().size());
  for (Job* job : book_.Pending()) keys.push_back(QueueKey::Of(*job));
  std::sort(keys.begin(), keys.end());
  std::vector<JobId> order;
  order.reserve(keys.size());
  for (const QueueKey& key : keys) order.push_back(key.id);
  return order;
}

}  // namespace cohort::engine
