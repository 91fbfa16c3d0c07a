// SPDX-License-Identifier: Apache-2.0
// The engine's scheduling policy: multifactor priority, holds, dependencies,
// QOS limits, arrays, backfill with reservations, and preemption. engine.cpp
// holds the job and node life cycle these decisions act on.
#include <signal.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/engine.h"
#include "cohort/fmt_absl.h"
#include "cohort/hostlist.h"
#include "cohort/reservation_timeline.h"
#include "cohort/slurm_time.h"

namespace cohort {
namespace {

Millis ToMillis(std::chrono::seconds s) { return std::chrono::duration_cast<Millis>(s); }

// The detail of a job that waits for Priority: one ahead of it waits too.
constexpr std::string_view kWaitingBehind = "waiting behind higher-priority jobs of the partition";

int GpusHeld(const Job& job) {
  int gpus = 0;
  for (const alloc::NodeGrant& g : job.placement.grants) gpus += std::popcount(g.gpus);
  return gpus;
}

int CpusHeld(const Job& job) {
  int cpus = 0;
  for (const alloc::NodeGrant& g : job.placement.grants) cpus += g.cpus;
  return cpus;
}

int GpusAsked(const Job& job) { return job.gang.gpus_per_node * job.gang.nodes; }

bool Active(const Job& job) {
  return job.state == JobState::kRunning || job.state == JobState::kCompleting;
}

// The latest a running job ends: its start plus its limit (now for one
// already stopping or past it; never for an unlimited one).
Millis EndBound(const Job& job, Millis now) {
  if (job.state == JobState::kCompleting) return now;
  if (job.time_limit == kUnlimited) return Millis::max();
  return std::max(job.start_time + ToMillis(job.time_limit), now);
}

// Whether one node of the gang could fit the node's free resources: an upper
// bound of what the allocator accepts, to skip hopeless placement attempts.
bool MayFit(const alloc::GangRequest& gang, const alloc::NodePool& pool, NodeId node) {
  return pool.Condition(node) == alloc::NodeCondition::kUp &&
         MayFitOneNode(gang, pool.Capacity(node), pool.Free(node));
}

// The nodes of the gang's partition (every node without one) that may fit
// one node of it now.
std::vector<NodeId> NodesThatMayFit(const alloc::GangRequest& gang, const alloc::NodePool& pool) {
  std::vector<NodeId> nodes;
  const auto add = [&](NodeId n) {
    if (MayFit(gang, pool, n)) nodes.push_back(n);
  };
  if (gang.partition) {
    for (const NodeId n : pool.GetPartition(*gang.partition).nodes) add(n);
  } else {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) add(n);
  }
  return nodes;
}

// Whether some QOS limits running jobs or GPUs, which passes must count.
bool HasRunningLimits(const config::ClusterConfig& config) {
  return std::any_of(config.qos.begin(), config.qos.end(), [](const config::QosSpec& q) {
    return q.max_jobs_per_user || q.max_gpus_per_user || q.max_gpus_per_account;
  });
}

// Counts the nodes that may fit, and keeps the count as grants come and go.
class FitCounter {
 public:
  FitCounter(const alloc::GangRequest& gang, alloc::NodePool& pool) : gang_(gang), pool_(pool) {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) {
      if (InPartition(n) && MayFit(gang, pool, n)) ++count_;
    }
  }
  void Release(const alloc::NodeGrant& grant) { Change(grant, true); }
  void Commit(const alloc::NodeGrant& grant) { Change(grant, false); }
  [[nodiscard]] bool Enough() const { return count_ >= gang_.nodes; }

 private:
  bool InPartition(NodeId n) const {
    return !gang_.partition || pool_.GetPartition(*gang_.partition).contains[n] != 0;
  }
  void Change(const alloc::NodeGrant& grant, bool release) {
    const bool counted = InPartition(grant.node);
    const bool before = counted && MayFit(gang_, pool_, grant.node);
    if (release) {
      pool_.Release({&grant, 1});
    } else {
      pool_.Commit({&grant, 1});
    }
    const bool after = counted && MayFit(gang_, pool_, grant.node);
    count_ += static_cast<int>(after) - static_cast<int>(before);
  }
  const alloc::GangRequest& gang_;
  alloc::NodePool& pool_;
  int count_ = 0;
};

// The grants a job still holds in the pool.
template <typename Visit>
void ForEachHeldGrant(const Job& job, Visit visit) {
  if (job.suspended) return;
  for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
    if (job.released[rank] == 0) visit(job.placement.grants[rank]);
  }
}

std::vector<alloc::NodeGrant> HeldGrants(const Job& job) {
  std::vector<alloc::NodeGrant> held;
  ForEachHeldGrant(job, [&](const alloc::NodeGrant& g) { held.push_back(g); });
  return held;
}

bool Touches(const Job& job, const alloc::Placement& placement) {
  for (const alloc::NodeGrant& mine : job.placement.grants) {
    for (const alloc::NodeGrant& theirs : placement.grants) {
      if (mine.node == theirs.node) return true;
    }
  }
  return false;
}

std::string SignalName(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name == nullptr ? std::to_string(signal) : std::string(name);
}

std::string Hms(Millis t) {
  const std::time_t seconds = static_cast<std::time_t>(t.count() / 1000);
  std::tm tm{};
  ::localtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string NodeNames(const topology::Topology& topology, const alloc::Placement& placement) {
  std::vector<std::string> names;
  for (const alloc::NodeGrant& g : placement.grants) names.push_back(topology.NodeName(g.node));
  return hostlist::Compress(names);
}

}  // namespace

/// What one pass has learned so far: running totals for limits and array
/// throttles, the reservations made, partitions whose top job waits.
struct Engine::PassState {
  Millis now{0};
  std::vector<Reservation> reservations;
  bool limits = false;  ///< some QOS has a running-job or GPU limit
  std::map<std::pair<std::string, std::uint32_t>, int> jobs_per_user;  ///< (qos, uid)
  std::map<std::pair<std::string, std::uint32_t>, int> gpus_per_user;
  std::map<std::pair<std::string, std::string>, int> gpus_per_account;  ///< (qos, account)
  std::map<JobId, int> array_running;
  std::set<JobId> preemptors;  ///< jobs whose victims are still stopping
  std::set<alloc::PartitionId> blocked;
  int backfill_tried = 0;
  /// The keys not taken yet, by partition, and how many of them lie in
  /// partitions not blocked yet: none, and the depth spent, settles the pass.
  std::map<alloc::PartitionId, std::size_t> left;
  std::size_t open = 0;

  void CountKeys(const std::vector<QueueKey>& keys) {
    for (const QueueKey& key : keys) ++left[key.partition];
    open = keys.size();
  }
  /// The pool as it is now, copied once per pass for reservation planning
  /// (which releases running jobs into it and takes them back after), and
  /// when each node could take each shape of gang as running jobs end.
  std::optional<alloc::NodePool> shadow;
  std::optional<ReservationTimeline> timeline;
  /// Nodes of the live pool that may fit one node of a gang, by (partition,
  /// exclusive, CPUs, memory, GPUs): a superset of where it can go now, so
  /// that a backfill candidate is skipped, or placed among these few nodes,
  /// without a pass over the whole pool. Cleared when the pool changes.
  std::map<GangShape, std::vector<NodeId>> may_fit;
  /// Per node, the earliest start of the reservations holding it
  /// (Millis::max(): none). A job is planned at most once per pass, so
  /// none of them is its own.
  std::vector<Millis> reserved_from;

  void Reserve(Reservation r) {
    for (const NodeId n : r.nodes) {
      Millis& from = reserved_from[static_cast<std::size_t>(n)];
      from = std::min(from, r.start);
    }
    reservations.push_back(std::move(r));
  }

  const std::vector<NodeId>& MayFitNodes(const alloc::GangRequest& gang,
                                         const alloc::NodePool& pool) {
    auto [it, fresh] = may_fit.try_emplace(ShapeOf(gang));
    if (fresh) it->second = NodesThatMayFit(gang, pool);
    return it->second;
  }

  void Count(const Job& job, int sign) {
    if (job.array_job_id != 0 && job.array_task_id >= 0) array_running[job.array_job_id] += sign;
    if (!limits) return;
    const int gpus = GpusAsked(job);
    jobs_per_user[{job.qos, job.request.uid}] += sign;
    gpus_per_user[{job.qos, job.request.uid}] += sign * gpus;
    gpus_per_account[{job.qos, job.request.account}] += sign * gpus;
  }
};

void Engine::SetReason(Job& job, std::string_view reason, std::string_view detail,
                       Effects& effects) {
  if (job.reason == reason && job.reason_detail == detail) return;
  job.reason = reason;
  job.reason_detail = detail;
  Changed(job, effects);
}

absl::Status Engine::CheckOwner(const Job& job, const Caller& caller, std::string_view verb) const {
  if (caller.IsOperator() || caller.uid == job.request.uid) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("job {} belongs to {}; you can {} only your own jobs", DisplayId(job),
                  job.request.user_name, verb));
}

// ------------------------------------------------------------- priority

policy::PriorityFactors Engine::PriorityOf(const Job& job, Millis now) const {
  return PriorityWith(
      job, fair_share_.Factor(config_, job.request.account, job.request.user_name, now), now);
}

policy::PriorityFactors Engine::PriorityWith(const Job& job, double fairshare, Millis now) const {
  policy::PriorityInputs in;
  in.age =
      job.state == JobState::kPending ? std::max(Millis{0}, now - job.eligible_time) : Millis{0};
  in.nodes = job.gang.nodes;
  in.cluster_nodes = std::max(1, topology_.NodeCount());
  in.fairshare = fairshare;
  in.partition_tier = job.priority_tier;
  in.max_partition_tier = max_tier_;
  const config::QosSpec* qos = config_.FindQos(job.qos);
  in.qos_priority = qos == nullptr ? 0 : qos->priority;
  in.max_qos_priority = max_qos_priority_;
  return policy::ComputePriority(config_.priority, in);
}

namespace {

// The resource-seconds (GPU-seconds, else CPU-seconds) a running job has
// used since it was last charged; they count as charged from now on.
double TakeUnbilled(Job& job, Millis now) {
  if (!Active(job) || job.suspended || job.start_time.count() == 0) return 0;
  const Millis from = std::max(job.charged_until, job.start_time);
  if (now <= from) return 0;
  const int gpus = GpusHeld(job);
  const double units = gpus > 0 ? gpus : CpusHeld(job);
  job.charged_until = now;
  return units * static_cast<double>((now - from).count()) / 1000.0;
}

}  // namespace

void Engine::ChargeUsage(Job& job, Millis now) {
  fair_share_.Charge(job.request.account, job.request.user_name, TakeUnbilled(job, now), now);
}

void Engine::ChargeUsage(Millis now) {
  // Summed per (account, user) and charged once each: the same usage as one
  // charge per job at the same instant, without a lookup per running job.
  std::vector<double> by_slot(share_owners_.size(), 0);
  for (Job* job : active_) {
    by_slot[static_cast<std::size_t>(job->share_slot)] += TakeUnbilled(*job, now);
  }
  for (std::size_t slot = 0; slot < by_slot.size(); ++slot) {
    fair_share_.Charge(share_owners_[slot].first, share_owners_[slot].second, by_slot[slot], now);
  }
}

std::vector<JobId> Engine::PendingOrder() const {
  std::vector<QueueKey> keys;
  keys.reserve(pending_.size());
  for (Job* job : pending_) keys.push_back(QueueKey::Of(*job));
  std::sort(keys.begin(), keys.end());
  std::vector<JobId> order;
  order.reserve(keys.size());
  for (const QueueKey& key : keys) order.push_back(key.id);
  return order;
}

std::size_t Engine::PendingCount() const { return pending_.size(); }

int Engine::QueuePosition(JobId id) const {
  const std::vector<JobId> order = PendingOrder();
  const auto it = std::find(order.begin(), order.end(), id);
  return it == order.end() ? 0 : static_cast<int>(it - order.begin()) + 1;
}

// ------------------------------------------------------------- eligibility

int Engine::DependencyStatus(Job& job, std::string& why) {
  Dependency& dep = job.dependency_left;
  if (dep.terms.empty()) return 1;
  std::vector<DependencyTerm> left;
  bool any_satisfied = false;
  bool any_never = false;
  int never = 0;  ///< terms that can never hold
  std::vector<std::string> waits;
  for (const DependencyTerm& term : dep.terms) {
    int status = 0;
    std::string what;
    if (term.type == DependencyType::kSingleton) {
      status = 1;
      for (const auto* index : {&active_, &pending_}) {
        for (const Job* other : *index) {
          if (status == 0) break;
          if (other->id != job.id && other->request.uid == job.request.uid &&
              other->request.name == job.request.name && (Active(*other) || other->id < job.id)) {
            status = 0;
            what = fmt::format("singleton: job {} of the same name \"{}\" is {}", DisplayId(*other),
                               job.request.name, JobStateName(other->state));
          }
        }
      }
    } else {
      const std::vector<JobId> ids = Lookup(JobRef{term.job, term.array_task});
      const std::string target = term.array_task >= 0
                                     ? fmt::format("{}_{}", term.job, term.array_task)
                                     : std::to_string(term.job);
      bool started = false, ended = !ids.empty(), ok = true;
      std::string state = "unknown";
      for (const JobId id : ids) {
        const Job& t = jobs_.at(id);
        state = std::string(JobStateName(t.state));
        // An array's record with tasks not yet created has not ended.
        if (t.state != JobState::kPending || t.start_time.count() != 0) started = true;
        if (!IsFinished(t.state) || (t.id == t.array_job_id && !t.array_pending.empty())) {
          ended = false;
        }
        if (IsFinished(t.state) && t.state != JobState::kCompleted) ok = false;
      }
      const std::string_view type = DependencyTypeName(term.type);
      if (ids.empty()) {
        // Gone from memory: its outcome is unknown here.
        status =
            term.type == DependencyType::kAfter || term.type == DependencyType::kAfterAny ? 1 : -1;
        what = fmt::format("{}:{}: job {} is no longer known", type, target, target);
      } else {
        switch (term.type) {
          case DependencyType::kAfter:
            status = started || ended ? 1 : 0;
            break;
          case DependencyType::kAfterAny:
            status = ended ? 1 : 0;
            break;
          case DependencyType::kAfterOk:
            status = ended ? (ok ? 1 : -1) : (ok ? 0 : -1);
            break;
          case DependencyType::kAfterNotOk:
            status = ended ? (ok ? -1 : 1) : 0;
            break;
          case DependencyType::kSingleton:
            break;
        }
        what = status == -1 ? fmt::format("{}:{}: job {} ended {}", type, target, target, state)
                            : fmt::format("{}:{}: job {} is {}", type, target, target, state);
      }
    }
    if (status == 1) {
      any_satisfied = true;
      continue;
    }
    if (status == -1) {
      any_never = true;
      ++never;
    }
    left.push_back(term);
    waits.push_back(what);
  }
  why = fmt::format("{}", fmt::join(waits, dep.any_of ? " or " : "; "));
  if (dep.any_of) {
    if (any_satisfied) {
      dep.terms.clear();
      return 1;
    }
    // Any one may still hold unless every term left can never hold.
    const bool all_never = never == static_cast<int>(left.size());
    dep.terms = std::move(left);
    return all_never ? -1 : 0;
  }
  dep.terms = std::move(left);
  if (any_never) return -1;
  return dep.terms.empty() ? 1 : 0;
}

std::string Engine::LimitReached(const Job& job, const PassState& pass) const {
  if (!pass.limits) return {};
  const config::QosSpec* qos = config_.FindQos(job.qos);
  if (qos == nullptr) return {};
  auto at = [](const auto& map, const auto& key) {
    const auto it = map.find(key);
    return it == map.end() ? 0 : it->second;
  };
  const int gpus = GpusAsked(job);
  if (qos->max_jobs_per_user &&
      at(pass.jobs_per_user, std::pair{job.qos, job.request.uid}) >= *qos->max_jobs_per_user) {
    return fmt::format(
        "QOSMaxJobsPerUserLimit|QOS {} allows {} running jobs per user (MaxJobsPerUser)", qos->name,
        *qos->max_jobs_per_user);
  }
  if (qos->max_gpus_per_user && at(pass.gpus_per_user, std::pair{job.qos, job.request.uid}) + gpus >
                                    *qos->max_gpus_per_user) {
    return fmt::format(
        "QOSMaxGpusPerUserLimit|QOS {} allows {} GPUs per user (MaxGpusPerUser); {} "
        "are in use and the job needs {}",
        qos->name, *qos->max_gpus_per_user,
        at(pass.gpus_per_user, std::pair{job.qos, job.request.uid}), gpus);
  }
  if (qos->max_gpus_per_account &&
      at(pass.gpus_per_account, std::pair{job.qos, job.request.account}) + gpus >
          *qos->max_gpus_per_account) {
    return fmt::format(
        "QOSMaxGpusPerAccountLimit|QOS {} allows {} GPUs per account (MaxGpusPerAccount); account "
        "{} "
        "uses {} and the job needs {}",
        qos->name, *qos->max_gpus_per_account, job.request.account,
        at(pass.gpus_per_account, std::pair{job.qos, job.request.account}), gpus);
  }
  return {};
}

bool Engine::Eligible(Job& job, PassState& pass, Millis now, Effects& effects) {
  if (job.held) {
    SetReason(job, job.held_by_operator ? "JobHeldAdmin" : "JobHeldUser",
              job.held_by_operator ? "held by an operator; an operator must release it"
                                   : fmt::format("held; run cohort release {}", DisplayId(job)),
              effects);
    return false;
  }
  if (!job.dependency_left.terms.empty()) {
    std::string why;
    const int status = DependencyStatus(job, why);
    if (status == 0) {
      SetReason(job, "Dependency", why, effects);
      return false;
    }
    if (status < 0) {
      if (job.request.kill_on_invalid_dep) {
        job.reason = fmt::format("its dependency can never be satisfied: {}", why);
        Apply(job, JobEvent::kCancelled, now, effects);
        job.array_pending.clear();
      } else {
        SetReason(job, "DependencyNeverSatisfied", why, effects);
      }
      return false;
    }
    job.eligible_time = std::max(job.eligible_time, now);
    Changed(job, effects);
  }
  if (const std::string limit = LimitReached(job, pass); !limit.empty()) {
    const std::size_t bar = limit.find('|');
    SetReason(job, limit.substr(0, bar), limit.substr(bar + 1), effects);
    return false;
  }
  if (!job.array_pending.empty() && job.request.array.max_running > 0) {
    const auto it = pass.array_running.find(job.array_job_id);
    if (it != pass.array_running.end() && it->second >= job.request.array.max_running) {
      SetReason(job, "JobArrayTaskLimit",
                fmt::format("{} tasks of the array run and it allows {} at once (%{})", it->second,
                            job.request.array.max_running, job.request.array.max_running),
                effects);
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------- starting

void Engine::Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects) {
  // Jobs that wait for this one to start (after:) may lie past where the
  // next release pass looks.
  if (IsDependencyTarget(job)) NeedPass();
  preempt_plans_.erase(job.id);
  pool_.Commit(placement.grants);
  job.placement = placement;
  job.released.assign(job.placement.grants.size(), 0);
  job.exited_ok.assign(job.placement.grants.size(), 0);
  job.start_time = now;
  job.charged_until = now;
  job.expected_start = Millis{0};
  job.reason = "None";
  job.reason_detail.clear();
  job.exit_code = 0;
  job.exit_signal = 0;
  job.master_port = MasterPort(job);
  for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
    const alloc::NodeGrant& grant = job.placement.grants[rank];
    nodes_[static_cast<std::size_t>(grant.node)].jobs.insert(job.id);
    effects.changed_nodes.push_back(grant.node);
    effects.commands.emplace_back(LaunchCommand{job.id, grant.node, static_cast<int>(rank), grant});
  }
  Apply(job, JobEvent::kAllocated, now, effects);
}

Job& Engine::SplitTask(Job& array, Millis now, Effects& effects) {
  COHORT_CHECK(!array.array_pending.empty(), "no task left to split off");
  const int task = array.array_pending.front();
  array.array_pending.erase(array.array_pending.begin());
  if (array.array_pending.empty()) {
    // The last task takes the array's record, as in Slurm.
    array.array_task_id = task;
    Changed(array, effects);
    return array;
  }
  Job copy;
  copy.id = next_id_++;
  copy.request = array.request;
  copy.request.array.tasks.clear();  // the record keeps the spec; tasks need only their id
  copy.gang = array.gang;
  copy.time_limit = array.time_limit;
  copy.priority_tier = array.priority_tier;
  copy.state = JobState::kPending;
  copy.submit_time = array.submit_time;
  copy.eligible_time = array.eligible_time;
  copy.qos = array.qos;
  copy.array_job_id = array.id;
  copy.array_task_id = task;
  copy.priority = array.priority;
  copy.charged_until = now;
  const JobId id = copy.id;
  auto [it, inserted] = jobs_.emplace(id, std::move(copy));
  COHORT_CHECK(inserted, "job id reused");
  Index(it->second);
  array_tasks_[array.id].push_back(id);
  Changed(array, effects);
  Changed(it->second, effects);
  return it->second;
}

void Engine::ResumeSuspended(Millis now, Effects& effects) {
  for (Job* entry : active_) {
    Job& job = *entry;
    if (!job.suspended || job.state != JobState::kRunning) continue;
    // Its preemptor waits for exactly these resources: not yet.
    if (const Job* preemptor = FindJob(job.preempted_by);
        preemptor != nullptr && preemptor->state == JobState::kPending) {
      continue;
    }
    bool fits = true;
    for (std::size_t rank = 0; rank < job.placement.grants.size() && fits; ++rank) {
      if (job.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.placement.grants[rank];
      const alloc::NodeFree& free = pool_.Free(g.node);
      fits = free.cpus >= g.cpus && free.memory_mb >= g.memory_mb && (free.gpus & g.gpus) == g.gpus;
    }
    if (!fits) continue;
    for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
      if (job.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.placement.grants[rank];
      pool_.Commit({&g, 1});
      effects.commands.emplace_back(SignalCommand{job.id, g.node, SIGCONT, false});
      effects.changed_nodes.push_back(g.node);
    }
    // Suspended time does not count against its limit.
    job.start_time += now - job.suspended_since;
    job.charged_until = now;
    job.suspended = false;
    job.suspended_since = Millis{0};
    if (!job.preemptions.empty()) {
      job.preemptions.back().detail += fmt::format("; resumed at {}", Hms(now));
    }
    job.reason_detail = "resumed (SIGCONT) after its preemptor released the resources";
    Changed(job, effects);
  }
}

// ------------------------------------------------------------- backfill

std::vector<NodeId> Engine::ReservedNodes(const std::vector<Reservation>& reservations,
                                          Millis start, const Job& job) {
  std::vector<NodeId> nodes;
  const Millis end =
      job.time_limit == kUnlimited ? Millis::max() : start + ToMillis(job.time_limit);
  // Repeats are harmless: the allocator marks excluded nodes in a mask.
  for (const Reservation& r : reservations) {
    if (r.job != job.id && r.start < end) nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
  }
  return nodes;
}

std::optional<Engine::Reservation> Engine::PlanReservation(const Job& job, PassState& pass,
                                                           Millis now) {
  if (!pass.shadow) pass.shadow = pool_;
  if (!pass.timeline) {
    std::vector<ReservationTimeline::Release> releases;
    for (const Job* other : active_) {
      const Millis end = EndBound(*other, now);
      if (end == Millis::max()) continue;
      ForEachHeldGrant(*other, [&](const alloc::NodeGrant& g) { releases.push_back({end, g}); });
    }
    pass.timeline.emplace(pool_, std::move(releases));
  }
  alloc::NodePool& shadow = *pass.shadow;
  ReservationTimeline& timeline = *pass.timeline;
  // Nodes join the count at the time they could first take one node of the
  // gang, unless a reservation holds them before the job's window from then
  // would end; as that window moves later, reservations take counted nodes
  // out of the count, soonest first.
  const ReservationTimeline::Fits& fits = timeline.FitTimes(job.gang);
  const std::vector<Millis>& reserved_from = pass.reserved_from;
  const auto window_end = [&](Millis t) {
    return job.time_limit == kUnlimited ? Millis::max() : t + ToMillis(job.time_limit);
  };
  using Held = std::pair<Millis, NodeId>;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held;  // counted, reserved later
  int count = 0;
  std::size_t next = 0;
  std::optional<Reservation> found;
  std::vector<NodeId> among;
  while (next < fits.order.size() && !found) {
    const Millis t = fits.order[next].first;
    const Millis end = window_end(t);
    for (; next < fits.order.size() && fits.order[next].first == t; ++next) {
      const NodeId n = fits.order[next].second;
      const Millis reserved = reserved_from[static_cast<std::size_t>(n)];
      if (reserved < end) continue;
      ++count;
      if (reserved != Millis::max()) held.emplace(reserved, n);
    }
    for (; !held.empty() && held.top().first < end; held.pop()) --count;
    // Place only when enough nodes may fit outside the reservations: a
    // placement then fails only for the shape of the tree (--switches,
    // segments), so most reservations cost one placement, on the shadow
    // pool as it will be at t on the nodes that count.
    if (count < job.gang.nodes) continue;
    among.clear();
    for (std::size_t i = 0; i < next; ++i) {
      const NodeId n = fits.order[i].second;
      if (reserved_from[static_cast<std::size_t>(n)] >= end) among.push_back(n);
    }
    timeline.Advance(among, t, shadow);
    const alloc::PlacementResult result =
        allocator_.Place(job.gang, shadow, alloc::GangAllocator::Classify::kNo, &among);
    if (result.outcome == alloc::Outcome::kPlaced) {
      found = Reservation{job.id, t, {}};
      for (const alloc::NodeGrant& g : result.placement.grants) found->nodes.push_back(g.node);
      std::sort(found->nodes.begin(), found->nodes.end());
    }
  }
  // Back to now for the next job.
  timeline.Rewind(shadow);
  return found;
}

// ------------------------------------------------------------- preemption

config::PreemptMode Engine::VictimMode(const Job& job) const {
  if (const config::QosSpec* qos = config_.FindQos(job.qos); qos != nullptr && qos->preempt_mode) {
    return *qos->preempt_mode;
  }
  if (const config::PartitionSpec* p = config_.FindPartition(job.request.partition);
      p != nullptr && p->preempt_mode) {
    return *p->preempt_mode;
  }
  return config_.preempt_mode;
}

std::chrono::seconds Engine::GraceOf(const Job& job) const {
  if (const config::QosSpec* qos = config_.FindQos(job.qos); qos != nullptr && qos->grace_time) {
    return *qos->grace_time;
  }
  if (const config::PartitionSpec* p = config_.FindPartition(job.request.partition);
      p != nullptr && p->grace_time) {
    return *p->grace_time;
  }
  return config_.preempt_grace_time;
}

int Engine::PreemptSignalOf(const Job& job) const {
  if (const config::QosSpec* qos = config_.FindQos(job.qos);
      qos != nullptr && qos->preempt_signal) {
    return *qos->preempt_signal;
  }
  if (const config::PartitionSpec* p = config_.FindPartition(job.request.partition);
      p != nullptr && p->preempt_signal) {
    return *p->preempt_signal;
  }
  return config_.preempt_signal;
}

bool Engine::MayPreempt(const Job& preemptor, const Job& victim, Millis now) const {
  if (config_.preempt_mode == config::PreemptMode::kOff) return false;
  if (victim.state != JobState::kRunning || victim.suspended ||
      victim.preempt_deadline.count() != 0) {
    return false;
  }
  if (VictimMode(victim) == config::PreemptMode::kOff) return false;
  if (now - victim.start_time < ToMillis(config_.preempt_exempt_time)) return false;
  if (victim.priority_tier < preemptor.priority_tier) return true;
  const config::QosSpec* qos = config_.FindQos(preemptor.qos);
  return qos != nullptr &&
         std::find(qos->preempt.begin(), qos->preempt.end(), victim.qos) != qos->preempt.end();
}

bool Engine::TryPreempt(Job& job, Millis now, Effects& effects) {
  if (config_.preempt_mode == config::PreemptMode::kOff) return false;
  struct Candidate {
    Job* job;
    double cost;  ///< resource-seconds lost if stopped now
    topology::SwitchId domain;
  };
  std::vector<Candidate> candidates;
  for (Job* entry : active_) {
    Job& other = *entry;
    if (!MayPreempt(job, other, now)) continue;
    const int gpus = GpusHeld(other);
    const double units = gpus > 0 ? gpus : CpusHeld(other);
    std::vector<NodeId> nodes;
    for (const alloc::NodeGrant& g : other.placement.grants) nodes.push_back(g.node);
    candidates.push_back(
        {&other, units * static_cast<double>((now - other.start_time).count()) / 1000.0,
         topology_.HasSwitchTree() ? topology_.LowestCommonSwitch(nodes) : topology::kNone});
  }
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.job->id < b.job->id;
  });

  // For each switch, lowest level first, release the cheapest victims under
  // it until the gang fits there; keep the cheapest solution of the lowest
  // level that has one. Without a switch tree, one domain holds everything.
  struct Solution {
    int level = 0;
    double cost = 0;
    std::vector<Job*> victims;
    alloc::Placement placement;
  };
  std::optional<Solution> best;
  alloc::NodePool shadow = pool_;
  FitCounter fit(job.gang, shadow);
  auto under = [&](topology::SwitchId domain, topology::SwitchId s) {
    for (topology::SwitchId at = domain; at != topology::kNone;
         at = topology_.GetSwitch(at).parent) {
      if (at == s) return true;
    }
    return false;
  };
  auto try_domain = [&](topology::SwitchId s, int level) {
    std::vector<Candidate*> released;
    for (Candidate& c : candidates) {
      if (s != topology::kNone && (c.domain == topology::kNone || !under(c.domain, s))) continue;
      for (const alloc::NodeGrant& g : HeldGrants(*c.job)) fit.Release(g);
      released.push_back(&c);
      if (!fit.Enough()) continue;
      const alloc::PlacementResult result =
          allocator_.Place(job.gang, shadow, alloc::GangAllocator::Classify::kNo);
      if (result.outcome != alloc::Outcome::kPlaced) continue;
      if (s != topology::kNone && !under(result.placement.domain, s)) continue;
      Solution solution{level, 0, {}, result.placement};
      for (Candidate* r : released) {
        if (Touches(*r->job, result.placement)) {
          solution.victims.push_back(r->job);
          solution.cost += r->cost;
        }
      }
      if (!best || solution.level < best->level ||
          (solution.level == best->level &&
           (solution.cost < best->cost ||
            (solution.cost == best->cost && solution.victims.size() < best->victims.size())))) {
        best = std::move(solution);
      }
      break;
    }
    for (Candidate* r : released) {
      for (const alloc::NodeGrant& g : HeldGrants(*r->job)) fit.Commit(g);
    }
  };
  if (topology_.HasSwitchTree()) {
    for (const topology::SwitchId s : topology_.SwitchesByLevel()) {
      const int level = topology_.GetSwitch(s).level;
      if (best && level > best->level) break;
      if (topology_.GetSwitch(s).node_count < job.gang.nodes) continue;
      try_domain(s, level);
    }
  } else {
    try_domain(topology::kNone, 0);
  }
  if (!best || best->victims.empty()) return false;

  std::vector<std::string> names;
  Millis deadline{0};
  for (Job* victim : best->victims) {
    const std::chrono::seconds grace = GraceOf(*victim);
    const int signal = PreemptSignalOf(*victim);
    victim->preempted_by = job.id;
    victim->preempt_deadline = now + ToMillis(grace);
    deadline = std::max(deadline, victim->preempt_deadline);
    PreemptionRecord record;
    record.time = now;
    record.by_job = job.id;
    record.by_display_id = DisplayId(job);
    record.mode = std::string(config::PreemptModeName(VictimMode(*victim)));
    record.attempt = victim->attempt;
    record.signal = signal;
    record.grace = grace;
    victim->preemptions.push_back(std::move(record));
    victim->reason_detail = fmt::format(
        "being preempted by job {} ({}): sent {}, stops at {} unless it ends or runs cohort "
        "checkpoint-done first",
        DisplayId(job), victim->preemptions.back().mode, SignalName(signal),
        Hms(victim->preempt_deadline));
    if (signal != 0) {
      for (const alloc::NodeGrant& g : HeldGrants(*victim)) {
        effects.commands.emplace_back(SignalCommand{victim->id, g.node, signal, false});
      }
    }
    names.push_back(DisplayId(*victim));
    Changed(*victim, effects);
    if (grace.count() == 0) StopVictim(*victim, "stopped at once (no grace time)", now, effects);
  }
  std::vector<NodeId>& plan = preempt_plans_[job.id];
  plan.clear();
  for (const alloc::NodeGrant& g : best->placement.grants) plan.push_back(g.node);
  std::sort(plan.begin(), plan.end());
  SetReason(job, "Resources",
            fmt::format("preempting job{} {}; they stop by {} at the latest",
                        names.size() == 1 ? "" : "s", fmt::join(names, ","), Hms(deadline)),
            effects);
  return true;
}

void Engine::StopVictim(Job& victim, const std::string& detail, Millis now, Effects& effects) {
  if (victim.state != JobState::kRunning) return;
  const config::PreemptMode mode = VictimMode(victim);
  if (!victim.preemptions.empty()) victim.preemptions.back().detail = detail;
  victim.preempt_deadline = Millis{0};
  const std::string by = fmt::format("preempted by job {}", victim.preempted_by);
  switch (mode) {
    case config::PreemptMode::kRequeue:
      victim.reason = by;
      Apply(victim, JobEvent::kPreempted, now, effects);
      break;
    case config::PreemptMode::kSuspend:
      for (std::size_t rank = 0; rank < victim.placement.grants.size(); ++rank) {
        if (victim.released[rank] != 0) continue;
        const alloc::NodeGrant& g = victim.placement.grants[rank];
        effects.commands.emplace_back(SignalCommand{victim.id, g.node, SIGSTOP, false});
        pool_.Release({&g, 1});
        effects.changed_nodes.push_back(g.node);
      }
      ChargeUsage(victim, now);
      victim.suspended = true;
      victim.suspended_since = now;
      victim.reason_detail = fmt::format("suspended (SIGSTOP): {}", by);
      NeedPass();
      Changed(victim, effects);
      break;
    case config::PreemptMode::kCancel:
    case config::PreemptMode::kOff:
      victim.reason = by;
      Apply(victim, JobEvent::kCancelled, now, effects);
      break;
  }
}

// ------------------------------------------------------------- the pass

void Engine::NeedPass() {
  schedule_needed_ = true;
  full_pass_needed_ = true;
}

void Engine::NeedReleasePass(const Job& job) {
  if (IsDependencyTarget(job)) {
    NeedPass();
    return;
  }
  schedule_needed_ = true;
  released_ = true;
}

void Engine::NoteDependencies(const Job& job) {
  for (const DependencyTerm& term : job.dependency_left.terms) {
    if (term.type == DependencyType::kSingleton) {
      singleton_waits_ = true;
    } else {
      dependency_targets_.insert(term.job);
    }
  }
}

bool Engine::IsDependencyTarget(const Job& job) const {
  return singleton_waits_ || dependency_targets_.contains(job.id) ||
         (job.array_job_id != 0 && dependency_targets_.contains(job.array_job_id));
}

bool Engine::SubmissionPass(Millis now, Effects& effects, bool past_releases) {
  if ((released_ && !past_releases) || full_pass_needed_) return false;
  if (HasRunningLimits(config_)) return false;
  std::vector<QueueKey> fresh;
  for (const JobId id : submitted_) {
    const auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.state == JobState::kPending) {
      fresh.push_back(QueueKey::Of(it->second));
    }
  }
  std::sort(fresh.begin(), fresh.end());
  for (const QueueKey& key : fresh) {
    const Job& job = *key.job;
    // Holds, dependencies and arrays take the full pass's rules.
    if (job.held || !job.dependency_left.terms.empty() || !job.array_pending.empty()) return false;
    // A job ahead of its partition's waiting job may start, or wait first
    // and need a reservation or victims: the full pass decides.
    const auto blocked = last_blocked_.find(job.gang.partition.value_or(-1));
    if (blocked == last_blocked_.end() || key < blocked->second) return false;
  }
  // Nothing was freed since the last full pass that a job waiting before
  // these could use, and every new job is behind a waiting one: a new job
  // starts only as backfill, where it delays none of the reservations that
  // pass made; the other jobs' fate is unchanged.
  schedule_needed_ = false;
  submitted_.clear();
  ForgetReleases();
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
        Start(job, result.placement, now, effects);
        continue;
      }
    }
    job.expected_start = Millis{0};
    SetReason(job, "Priority", kWaitingBehind, effects);
  }
  return true;
}

void Engine::ForgetReleases() {
  released_ = false;
  released_nodes_.clear();
  released_array_task_ = false;
}

bool Engine::ReleaseCannotMatter() const {
  if (!released_ || full_pass_needed_ || !preempt_plans_.empty() || released_array_task_ ||
      HasRunningLimits(config_)) {
    return false;
  }
  if (std::any_of(active_.begin(), active_.end(), [](const Job* job) { return job->suspended; })) {
    return false;
  }
  // The shapes of the jobs submitted since the last pass, not counted: a
  // sweep's next job may fit where its last one ended.
  std::map<GangShape, int> fresh;
  for (const JobId id : submitted_) {
    const auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.state == JobState::kPending) {
      ++fresh[ShapeOf(it->second.gang)];
    }
  }
  for (const auto& [shape, jobs] : pending_shapes_) {
    const auto new_ones = fresh.find(shape);
    if (new_ones != fresh.end() && new_ones->second >= jobs) continue;
    for (const NodeId node : released_nodes_) {
      if (MayFitOneNode(shape, pool_.Capacity(node), pool_.Free(node))) return false;
    }
  }
  return true;
}

void Engine::Schedule(Millis now, Effects& effects) {
  // A job that ends on a node the waiting jobs cannot use (the CPUs a GPU
  // job leaves, say) costs no walk of the queue: at 100,000 jobs a release
  // pass plans BackfillDepth reservations again, 10-20 ms.
  const bool releases_cannot_matter = ReleaseCannotMatter();
  if (releases_cannot_matter && submitted_.empty()) {
    schedule_needed_ = false;
    ForgetReleases();
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

void Engine::BeginPass(PassState& pass, Millis now, Effects& effects) {
  schedule_needed_ = false;
  ForgetReleases();
  submitted_.clear();
  last_blocked_.clear();
  ChargeUsage(now);
  ResumeSuspended(now, effects);
  pass.now = now;
  pass.reserved_from.assign(static_cast<std::size_t>(pool_.NodeCount()), Millis::max());
  pass.limits = HasRunningLimits(config_);
  for (const Job* job : active_) {
    pass.Count(*job, 1);
    // Victims still in their grace time, or stopping: their preemptor
    // waits for them and chooses no more.
    if (job->preempted_by != 0 &&
        (job->preempt_deadline.count() != 0 || job->state == JobState::kCompleting)) {
      pass.preemptors.insert(job->preempted_by);
    }
  }
  std::erase_if(preempt_plans_, [this](const auto& entry) {
    const Job* preemptor = FindJob(entry.first);
    return preemptor == nullptr || preemptor->state != JobState::kPending;
  });
  // Victims whose preemptor no longer waits are spared.
  for (Job* entry : active_) {
    Job& job = *entry;
    if (job.preempt_deadline.count() == 0 || job.state != JobState::kRunning) continue;
    const Job* preemptor = FindJob(job.preempted_by);
    if (preemptor == nullptr || preemptor->state != JobState::kPending) {
      job.preempt_deadline = Millis{0};
      if (!job.preemptions.empty()) {
        job.preemptions.back().detail = "called off: the preemptor no longer waits";
      }
      job.reason_detail.clear();
      Changed(job, effects);
    }
  }
}

void Engine::Prioritize(Job& job, std::vector<double>& shares, Millis now) {
  double& share = shares[static_cast<std::size_t>(job.share_slot)];
  if (share < 0) {
    const auto& [account, user] = share_owners_[static_cast<std::size_t>(job.share_slot)];
    share = fair_share_.Factor(config_, account, user, now);
  }
  job.priority = PriorityWith(job, share, now).total;
}

void Engine::Take(const QueueKey& key, PassState& pass, Millis now, Effects& effects) {
  Job& job = *key.job;
  if (job.state != JobState::kPending) return;
  if (!Eligible(job, pass, now, effects)) return;
  const alloc::PartitionId partition = job.gang.partition.value_or(-1);
  const bool behind = pass.blocked.contains(partition);
  if (behind && pass.backfill_tried >= config_.backfill_depth) {
    SetReason(job, "Priority", kWaitingBehind, effects);
    job.expected_start = Millis{0};
    return;
  }
  bool started = false;
  while (true) {
    alloc::GangRequest gang = job.gang;
    const std::vector<NodeId> reserved = ReservedNodes(pass.reservations, now, job);
    gang.excluded_nodes.insert(gang.excluded_nodes.end(), reserved.begin(), reserved.end());
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
    if (result.outcome == alloc::Outcome::kInfeasible && !reserved.empty()) {
      result.outcome = alloc::Outcome::kBusy;  // reservations are in its way, not the cluster
      result.reason = "the free nodes are reserved for higher-priority jobs";
    }
    if (result.outcome == alloc::Outcome::kPlaced) {
      Job& target = job.array_pending.empty() ? job : SplitTask(job, now, effects);
      Start(target, result.placement, now, effects);
      pass.may_fit.clear();
      if (pass.shadow) pass.shadow->Commit(result.placement.grants);
      if (pass.timeline) {
        for (const alloc::NodeGrant& g : result.placement.grants)
          pass.timeline->NodeChanged(g.node);
      }
      pass.Count(target, 1);
      started = true;
      if (job.state == JobState::kPending && !job.array_pending.empty() &&
          Eligible(job, pass, now, effects)) {
        continue;  // the array's next task
      }
      break;
    }
    if (started) break;
    if (result.outcome == alloc::Outcome::kInfeasible) {
      SetReason(job, "ReqNodeNotAvail", result.reason, effects);
      break;
    }
    const bool chose =
        !pass.preemptors.contains(job.id) && !behind && TryPreempt(job, now, effects);
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
      if (const auto plan = preempt_plans_.find(job.id); plan != preempt_plans_.end()) {
        pass.Reserve(Reservation{job.id, now, plan->second});
      }
    } else {
      // The first BackfillDepth waiting jobs get a reservation.
      std::optional<Reservation> r;
      if (static_cast<int>(pass.reservations.size()) < config_.backfill_depth) {
        r = PlanReservation(job, pass, now);
      }
      job.expected_start = r ? r->start : Millis{0};
      if (r) pass.Reserve(std::move(*r));
      SetReason(job, behind ? "Priority" : "Resources",
                behind ? kWaitingBehind : std::string_view(result.reason), effects);
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

void Engine::TakeInOrder(const QueueKey& key, PassState& pass, Millis now, Effects& effects) {
  const bool was_blocked = pass.blocked.contains(key.partition);
  std::size_t& in_partition = pass.left[key.partition];
  --in_partition;
  if (!was_blocked) --pass.open;
  Take(key, pass, now, effects);
  if (!was_blocked && pass.blocked.contains(key.partition)) pass.open -= in_partition;
}

void Engine::FullPass(Millis now, Effects& effects) {
  last_pass_kind_ = "full";
  full_pass_needed_ = false;
  last_full_pass_ = now;
  PassState pass;
  BeginPass(pass, now, effects);
  // Multifactor priority, with each (account, user)'s fair share computed once.
  std::vector<double> shares(share_owners_.size(), -1);
  std::vector<QueueKey> keys;
  keys.reserve(pending_.size());
  dependency_targets_.clear();
  singleton_waits_ = false;
  std::vector<Job*> by_id(pending_.begin(), pending_.end());
  for (Job* job : by_id) {
    Prioritize(*job, shares, now);
    keys.push_back(QueueKey::Of(*job));
    NoteDependencies(*job);
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

bool Engine::ReleasePass(Millis now, Effects& effects) {
  if (!released_ || full_pass_needed_) return false;
  if (!last_order_complete_ && last_order_.empty()) return false;
  // The part of the queue the last full pass took in order, as it ordered
  // it, with the new jobs merged in at their priority now.
  std::vector<QueueKey> keys;
  keys.reserve(last_order_.size() + submitted_.size());
  for (const QueueKey& stored : last_order_) {
    const auto it = jobs_.find(stored.id);
    if (it == jobs_.end() || it->second.state != JobState::kPending) continue;
    QueueKey key = stored;
    key.job = &it->second;
    keys.push_back(key);
  }
  const std::size_t kept = keys.size();
  std::vector<double> shares(share_owners_.size(), -1);
  for (const JobId id : submitted_) {
    const auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.state != JobState::kPending) continue;
    Prioritize(it->second, shares, now);
    keys.push_back(QueueKey::Of(it->second));
  }
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

std::vector<JobId> Engine::Lookup(JobRef ref) const {
  std::vector<JobId> ids;
  const auto tasks = array_tasks_.find(ref.job);
  const Job* record = FindJob(ref.job);
  if (ref.task >= 0) {
    if (tasks != array_tasks_.end()) {
      for (const JobId id : tasks->second) {
        if (jobs_.at(id).array_task_id == ref.task) return {id};
      }
    }
    if (record != nullptr && record->array_job_id == ref.job &&
        (record->array_task_id == ref.task ||
         std::binary_search(record->array_pending.begin(), record->array_pending.end(),
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

absl::Status Engine::Cancel(JobRef ref, int signal, const Caller& caller, Millis now,
                            Effects& effects) {
  const std::string name =
      ref.task >= 0 ? fmt::format("{}_{}", ref.job, ref.task) : std::to_string(ref.job);
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", name));
  if (ref.task >= 0) {
    Job& job = jobs_.at(ids.front());
    if (job.array_task_id == ref.task || job.array_job_id != job.id) {
      return Cancel(job.id, signal, caller, now, effects);
    }
    // A task not yet created: drop it from the array.
    if (absl::Status s = CheckOwner(job, caller, "cancel"); !s.ok()) return s;
    if (signal != 0) {
      return absl::FailedPreconditionError(
          fmt::format("job {} is pending; only running jobs can be signalled", name));
    }
    std::erase(job.array_pending, ref.task);
    if (job.array_pending.empty() && job.array_task_id < 0) {
      job.reason = "every task was cancelled before it started";
      Apply(job, JobEvent::kCancelled, now, effects);
    }
    Changed(job, effects);
    return absl::OkStatus();
  }
  absl::Status first = absl::OkStatus();
  int acted = 0;
  for (const JobId id : ids) {
    const Job& job = jobs_.at(id);
    if (IsFinished(job.state) || (signal != 0 && job.state != JobState::kRunning)) continue;
    absl::Status s = Cancel(id, signal, caller, now, effects);
    if (s.ok()) {
      ++acted;
    } else if (first.ok()) {
      first = s;
    }
  }
  if (acted > 0 || !first.ok()) return first;
  return ids.size() == 1 ? Cancel(ids.front(), signal, caller, now, effects)
                         : absl::FailedPreconditionError(
                               fmt::format("every task of array {} has already finished", name));
}

absl::Status Engine::Hold(JobRef ref, const Caller& caller, Effects& effects) {
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  int held = 0;
  for (const JobId id : ids) {
    Job& job = jobs_.at(id);
    if (absl::Status s = CheckOwner(job, caller, "hold"); !s.ok()) return s;
    if (job.state != JobState::kPending) continue;
    job.held = true;
    job.held_by_operator = caller.IsOperator() && caller.uid != job.request.uid;
    job.expected_start = Millis{0};
    SetReason(job, job.held_by_operator ? "JobHeldAdmin" : "JobHeldUser",
              job.held_by_operator ? "held by an operator; an operator must release it"
                                   : fmt::format("held; run cohort release {}", DisplayId(job)),
              effects);
    ++held;
  }
  if (held == 0) {
    return absl::FailedPreconditionError(fmt::format(
        "job {} is not pending; only pending jobs can be held", DisplayId(jobs_.at(ids.front()))));
  }
  NeedPass();  // reservations it held are free for others
  return absl::OkStatus();
}

absl::Status Engine::Release(JobRef ref, const Caller& caller, Millis now, Effects& effects) {
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  int released = 0;
  for (const JobId id : ids) {
    Job& job = jobs_.at(id);
    if (absl::Status s = CheckOwner(job, caller, "release"); !s.ok()) return s;
    if (!job.held) continue;
    if (job.held_by_operator && !caller.IsOperator()) {
      return absl::PermissionDeniedError(fmt::format(
          "job {} was held by an operator; ask an operator to release it", DisplayId(job)));
    }
    job.held = false;
    job.held_by_operator = false;
    job.eligible_time = now;
    SetReason(job, "None", "", effects);
    ++released;
  }
  if (released == 0) {
    return absl::FailedPreconditionError(
        fmt::format("job {} is not held; see cohort queue", DisplayId(jobs_.at(ids.front()))));
  }
  NeedPass();
  return absl::OkStatus();
}

absl::Status Engine::Requeue(JobRef ref, const Caller& caller, Millis now, Effects& effects) {
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  int requeued = 0;
  for (const JobId id : ids) {
    Job& job = jobs_.at(id);
    if (absl::Status s = CheckOwner(job, caller, "requeue"); !s.ok()) return s;
    if (job.state != JobState::kRunning) continue;
    job.reason = caller.IsOperator() && caller.uid != job.request.uid ? "requeued by an operator"
                                                                      : "requeued by its owner";
    Apply(job, JobEvent::kRequeued, now, effects);
    ++requeued;
  }
  if (requeued == 0) {
    const Job& job = jobs_.at(ids.front());
    return absl::FailedPreconditionError(
        fmt::format("job {} is {}; only running jobs can be requeued", DisplayId(job),
                    JobStateName(job.state)));
  }
  return absl::OkStatus();
}

absl::Status Engine::CheckpointDone(JobRef ref, const Caller& caller, Millis now,
                                    Effects& effects) {
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  int stopped = 0;
  for (const JobId id : ids) {
    Job& job = jobs_.at(id);
    if (absl::Status s = CheckOwner(job, caller, "stop"); !s.ok()) return s;
    if (job.state != JobState::kRunning || job.preempt_deadline.count() == 0) continue;
    const Millis since = job.preemptions.empty() ? Millis{0} : now - job.preemptions.back().time;
    StopVictim(job, fmt::format("checkpoint done after {:.1f} s", since.count() / 1000.0), now,
               effects);
    ++stopped;
  }
  if (stopped == 0) {
    return absl::FailedPreconditionError(fmt::format(
        "job {} is not being preempted; checkpoint-done ends the grace time of a job that is",
        DisplayId(jobs_.at(ids.front()))));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- why

absl::StatusOr<Explanation> Engine::Explain(JobRef ref, Millis now) {
  const std::vector<JobId> ids = Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  const Job* found = nullptr;
  for (const JobId id : ids) {
    const Job& j = jobs_.at(id);
    if (j.state == JobState::kPending && (found == nullptr || found->state != JobState::kPending)) {
      found = &j;
    }
  }
  const Job& job = found != nullptr ? *found : jobs_.at(ids.front());
  const std::string id = DisplayId(job);
  Explanation e;
  e.expected_start = job.expected_start;
  if (job.state != JobState::kPending) {
    e.summary =
        job.state == JobState::kRunning
            ? fmt::format("Job {} is running on {}.", id, NodeNames(topology_, job.placement))
            : fmt::format("Job {} is {}: {}.", id, JobStateName(job.state), job.reason);
    if (job.preempt_deadline.count() != 0) {
      e.blockers.push_back(job.reason_detail);
      e.suggestions.push_back(
          fmt::format("save a checkpoint and run cohort checkpoint-done {} to stop at once", id));
    }
    return e;
  }
  const std::string& reason = job.reason;
  if (reason == "JobHeldUser" || reason == "JobHeldAdmin") {
    e.summary = fmt::format("Job {} is held and will not start until it is released.", id);
    e.blockers.push_back(job.reason_detail);
    if (reason == "JobHeldUser") e.suggestions.push_back(fmt::format("cohort release {}", id));
    return e;
  }
  if (reason == "Dependency" || reason == "DependencyNeverSatisfied") {
    e.summary =
        reason == "Dependency"
            ? fmt::format("Job {} waits for its dependency.", id)
            : fmt::format("Job {}'s dependency can never be satisfied; it will not start.", id);
    e.blockers.push_back(job.reason_detail);
    if (reason == "DependencyNeverSatisfied") {
      e.suggestions.push_back(fmt::format(
          "cancel it (cohort cancel {}) and submit again with a dependency that can hold", id));
    }
    return e;
  }
  if (reason.starts_with("QOS") || reason == "JobArrayTaskLimit") {
    e.summary = fmt::format("Job {} waits for a limit ({}).", id, reason);
    e.blockers.push_back(job.reason_detail);
    e.suggestions.push_back(reason == "JobArrayTaskLimit"
                                ? "the next task starts when a running one ends"
                                : "it starts when your running jobs under this limit end, or "
                                  "with another --qos");
    return e;
  }
  // Resources or priority: who is ahead, what the nearest domains lack, and
  // what would start it sooner.
  const alloc::PartitionId partition = job.gang.partition.value_or(-1);
  std::vector<std::string> ahead;
  int ahead_count = 0;
  for (const JobId other_id : PendingOrder()) {
    if (other_id == job.id) break;
    const Job& other = jobs_.at(other_id);
    if (other.gang.partition.value_or(-1) != partition || other.held ||
        other.reason == "Dependency" || other.reason == "DependencyNeverSatisfied") {
      continue;
    }
    if (++ahead_count <= 3) {
      ahead.push_back(fmt::format("{} (priority {}, {} node{})", DisplayId(other), other.priority,
                                  other.gang.nodes, other.gang.nodes == 1 ? "" : "s"));
    }
  }
  const alloc::PlacementResult now_result = allocator_.Place(job.gang, pool_);
  if (ahead_count > 0) {
    e.blockers.push_back(
        fmt::format("{} job{} of higher priority wait{} ahead of it in partition "
                    "{}: {}{}",
                    ahead_count, ahead_count == 1 ? "" : "s", ahead_count == 1 ? "s" : "",
                    job.request.partition, fmt::join(ahead, ", "), ahead_count > 3 ? ", …" : ""));
  }
  if (now_result.outcome != alloc::Outcome::kPlaced) {
    e.blockers.push_back(fmt::format("resources: {}", now_result.reason));
    // The switch domains that come closest: fitting nodes per leaf.
    if (topology_.HasSwitchTree()) {
      std::vector<std::pair<int, topology::SwitchId>> leaves;
      for (const topology::SwitchId s : topology_.SwitchesByLevel()) {
        const topology::Switch& sw = topology_.GetSwitch(s);
        if (sw.level != 0) continue;
        int fit = 0;
        for (const NodeId n : sw.nodes) {
          if ((!job.gang.partition || pool_.GetPartition(*job.gang.partition).contains[n] != 0) &&
              MayFit(job.gang, pool_, n)) {
            ++fit;
          }
        }
        leaves.emplace_back(fit, s);
      }
      std::sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      std::vector<std::string> closest;
      for (std::size_t i = 0; i < leaves.size() && i < 3; ++i) {
        const topology::Switch& sw = topology_.GetSwitch(leaves[i].second);
        closest.push_back(fmt::format("{} has {} of {} nodes free enough", sw.name, leaves[i].first,
                                      sw.node_count));
      }
      e.blockers.push_back(fmt::format("closest switches for its {} node{}: {}", job.gang.nodes,
                                       job.gang.nodes == 1 ? "" : "s", fmt::join(closest, "; ")));
    }
  }
  if (job.reason_detail.starts_with("preempting")) e.blockers.push_back(job.reason_detail);
  // What would help.
  if (job.gang.nodes > 1 && now_result.outcome != alloc::Outcome::kPlaced) {
    int lo = 0, hi = job.gang.nodes - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      alloc::GangRequest smaller = job.gang;
      smaller.nodes = mid;
      smaller.segment.reset();
      if (allocator_.Place(smaller, pool_).outcome == alloc::Outcome::kPlaced) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo > 0) e.suggestions.push_back(fmt::format("with -N {} it could start now", lo));
  }
  if (job.gang.max_leaves && now_result.outcome != alloc::Outcome::kPlaced) {
    alloc::GangRequest looser = job.gang;
    looser.max_leaves.reset();
    if (allocator_.Place(looser, pool_).outcome == alloc::Outcome::kPlaced) {
      e.suggestions.push_back(
          fmt::format("without --switches={} it could start now, spread over more leaf switches",
                      *job.gang.max_leaves));
    }
  }
  for (const config::PartitionSpec& p : config_.partitions) {
    if (p.name == job.request.partition) continue;
    JobRequest other = job.request;
    other.partition = p.name;
    other.array = {};
    absl::StatusOr<Job> resolved = Resolve(other);
    if (!resolved.ok()) continue;
    if (allocator_.Place(resolved->gang, pool_).outcome == alloc::Outcome::kPlaced) {
      e.suggestions.push_back(
          fmt::format("partition {} could start it now (-p {})", p.name, p.name));
    }
  }
  if (job.expected_start.count() != 0) {
    const auto minutes =
        std::chrono::duration_cast<std::chrono::minutes>(job.expected_start - now).count();
    e.summary = fmt::format(
        "Job {} waits for {}; the backfill plan starts it by {} (in about {} "
        "minute{}).",
        id, reason == "Priority" ? "higher-priority jobs" : "resources", Hms(job.expected_start),
        std::max<long>(minutes, 0), minutes == 1 ? "" : "s");
  } else {
    e.summary = fmt::format("Job {} waits for {}; no start time is known yet ({}).", id,
                            reason == "Priority" ? "higher-priority jobs" : "resources",
                            job.time_limit == kUnlimited || ahead_count >= config_.backfill_depth
                                ? "it is beyond the backfill depth or the jobs in its way have "
                                  "no time limit"
                                : "the jobs in its way have no time limit");
  }
  if (e.suggestions.empty() && job.time_limit != kUnlimited) {
    e.suggestions.push_back("a shorter --time lets it backfill into gaps before reservations");
  }
  return e;
}

}  // namespace cohort
