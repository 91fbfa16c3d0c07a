// SPDX-License-Identifier: Apache-2.0
#include "engine/admission.h"

#include <algorithm>

#include <fmt/format.h>

#include "cohort/engine/engine_types.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"
#include "engine/engine_support.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/pass_triggers.h"

namespace cohort::engine {
namespace {

// The time limit in force, within the partition's and QOS' bounds.
absl::Status ResolveTime(const JobRequest& request, const config::PartitionSpec& partition,
                         const config::QosSpec& qos, Job& job) {
  if (request.time_limit.count() < 0) {
    return absl::InvalidArgumentError("time: the time limit is negative");
  }
  if (request.time_limit.count() == 0) {
    job.time_limit = partition.default_time.value_or(partition.max_time);
  } else if (partition.max_time != kUnlimited && request.time_limit > partition.max_time) {
    return absl::InvalidArgumentError(fmt::format(
        "time: {} is over partition {}'s MaxTime {}; ask for less with -t",
        FormatSlurmTime(request.time_limit), partition.name, FormatSlurmTime(partition.max_time)));
  } else {
    job.time_limit = request.time_limit;
  }
  if (qos.max_wall) {
    if (request.time_limit.count() > 0 && request.time_limit > *qos.max_wall) {
      return absl::InvalidArgumentError(fmt::format(
          "time: {} is over QOS {}'s MaxWall {}; ask for less with -t",
          FormatSlurmTime(request.time_limit), qos.name, FormatSlurmTime(*qos.max_wall)));
    }
    if (job.time_limit == kUnlimited || job.time_limit > *qos.max_wall) {
      job.time_limit = *qos.max_wall;
    }
  }
  return absl::OkStatus();
}

// What the QOS never allows, and the request's own bounds.
absl::Status CheckQosAndBounds(const JobRequest& request, const config::QosSpec& qos) {
  const int gpus = request.gpus_per_node * request.nodes;
  if (qos.max_gpus_per_user && gpus > *qos.max_gpus_per_user) {
    return absl::FailedPreconditionError(fmt::format(
        "the job can never run here: QOS {} allows {} GPUs per user (MaxGpusPerUser) and the job "
        "asks for {}; ask for fewer or use another --qos",
        qos.name, *qos.max_gpus_per_user, gpus));
  }
  if (qos.max_gpus_per_account && gpus > *qos.max_gpus_per_account) {
    return absl::FailedPreconditionError(fmt::format(
        "the job can never run here: QOS {} allows {} GPUs per account (MaxGpusPerAccount) and "
        "the job asks for {}; ask for fewer or use another --qos",
        qos.name, *qos.max_gpus_per_account, gpus));
  }
  if (request.switches < 0) {
    return absl::InvalidArgumentError("switches: the leaf switch count must be at least 1");
  }
  if (request.segment < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "segment: {} nodes per segment; give at least 1, or leave --segment out", request.segment));
  }
  if (request.warning.signal < 0 || request.warning.signal > 64) {
    return absl::InvalidArgumentError(fmt::format(
        "signal: {} is not a signal number; give 1-64 (--signal=USR1@90)", request.warning.signal));
  }
  if (request.warning.before.count() < 0 || request.warning.before > kMaxWarningLead) {
    return absl::InvalidArgumentError(
        fmt::format("signal: the warning {} s before the time limit is outside 0-{} s",
                    request.warning.before.count(), kMaxWarningLead.count()));
  }
  return absl::OkStatus();
}

absl::Status ResolveNames(const topology::Topology& topology, const std::vector<std::string>& names,
                          std::string_view option, std::vector<NodeId>& out) {
  for (const std::string& name : names) {
    const std::optional<NodeId> id = topology.FindNode(name);
    if (!id) {
      return absl::InvalidArgumentError(
          fmt::format("{}: no node {}; see cohort nodes", option, name));
    }
    out.push_back(*id);
  }
  return absl::OkStatus();
}

// Root and Operators= may charge any account and pick any QOS.
bool IsPrivileged(const JobRequest& request, const config::ClusterConfig& config) {
  return request.uid == 0 || Lists(config.operators, request.user_name);
}

// The partition's account, user and QOS rules, and the account's members.
// Each refusal says who may.
absl::Status CheckAllowed(const JobRequest& request, const config::ClusterConfig& config,
                          const config::PartitionSpec& partition, const config::QosSpec& qos) {
  if (!partition.allow_accounts.empty() && !Lists(partition.allow_accounts, request.account)) {
    return absl::PermissionDeniedError(
        fmt::format("account: partition {} allows accounts {}; \"{}\" is not one of them; pass -A",
                    partition.name, fmt::join(partition.allow_accounts, ","), request.account));
  }
  if (!partition.allow_users.empty() && !Lists(partition.allow_users, request.user_name)) {
    return absl::PermissionDeniedError(
        fmt::format("partition: {} allows users {}; \"{}\" is not one of them; pass -p",
                    partition.name, fmt::join(partition.allow_users, ","), request.user_name));
  }
  // The DefaultQOS of a config built in code has no name of its own.
  const std::string& qos_name = qos.name.empty() ? config.default_qos : qos.name;
  if (!partition.allow_qos.empty() && !Lists(partition.allow_qos, qos_name)) {
    return absl::PermissionDeniedError(
        fmt::format("qos: partition {} allows QOS {}; \"{}\" is not one of them; pass --qos",
                    partition.name, fmt::join(partition.allow_qos, ","), qos_name));
  }
  if (IsPrivileged(request, config)) return absl::OkStatus();
  const config::AccountSpec* account = config.FindAccount(request.account);
  // An account sacctmgr made takes only its users, even before it has any.
  if (account != nullptr && (!account->users.empty() || account->managed) &&
      !Lists(account->users, request.user_name)) {
    return absl::PermissionDeniedError(fmt::format(
        "account: {} is not a member of account {}; its members are {} ({}), and root and "
        "Operators= may charge any account; pass -A with an account of yours",
        request.user_name, account->name,
        account->users.empty() ? std::string("none yet")
                               : fmt::format("{}", fmt::join(account->users, ",")),
        account->managed ? fmt::format("sacctmgr add user NAME Account={}", account->name)
                         : fmt::format("AccountName={} Users=", account->name)));
  }
  if ((!qos.allow_accounts.empty() || !qos.allow_users.empty()) &&
      !Lists(qos.allow_accounts, request.account) && !Lists(qos.allow_users, request.user_name)) {
    std::vector<std::string> who;
    if (!qos.allow_accounts.empty()) {
      who.push_back(fmt::format("accounts {}", fmt::join(qos.allow_accounts, ",")));
    }
    if (!qos.allow_users.empty()) {
      who.push_back(fmt::format("users {}", fmt::join(qos.allow_users, ",")));
    }
    return absl::PermissionDeniedError(fmt::format(
        "qos: QOS {} is for {} (and root and Operators=); user {} with account {} may not ask for "
        "it; pass another --qos",
        qos_name, fmt::join(who, " and "), request.user_name, request.account));
  }
  const config::AssocQos assoc = config::QosOf(config, request.account, request.user_name);
  if (!assoc.allowed.empty() && !Lists(assoc.allowed, qos_name)) {
    return absl::PermissionDeniedError(fmt::format(
        "qos: user {} in account {} may use QOS {}; \"{}\" is not one of them; pass --qos with "
        "one of those (sacctmgr show assoc lists them; an operator adds one with sacctmgr modify "
        "account {} set QOS+={})",
        request.user_name, request.account, fmt::join(assoc.allowed, ","), qos_name,
        request.account, qos_name));
  }
  return absl::OkStatus();
}

// The QOS of a job that names none: its association's DefaultQOS, else the
// cluster's DefaultQOS where the association may use it, else the first QOS
// it may use.
std::string DefaultQos(const JobRequest& request, const config::ClusterConfig& config) {
  if (config.accounts.empty()) return config.default_qos;
  config::AssocQos assoc = config::QosOf(config, request.account, request.user_name);
  if (!assoc.default_qos.empty()) return assoc.default_qos;
  if (assoc.allowed.empty() || Lists(assoc.allowed, config.default_qos)) return config.default_qos;
  return assoc.allowed.front();
}

// The account of a job that names none: the user's DefaultAccount
// (sacctmgr), else the first account that lists its user in Users=, else
// the user's own name (Slurm's default account).
std::string DefaultAccount(const JobRequest& request, const config::ClusterConfig& config) {
  for (const auto& [user, account] : config.default_accounts) {
    if (user == request.user_name) return account;
  }
  for (const config::AccountSpec& account : config.accounts) {
    if (Lists(account.users, request.user_name)) return account.name;
  }
  return request.user_name;
}

}  // namespace

Admission::Admission(const Parts& parts)
    : config_(parts.config),
      topology_(parts.topology),
      pool_(parts.pool),
      checks_(parts.checks),
      book_(parts.book),
      triggers_(parts.triggers),
      life_(parts.life),
      quotas_(parts.config, parts.usage),
      reservations_(parts.reservations) {
  AccountsChanged();
  Recount();
}

config::PartitionState Admission::StateOf(const config::PartitionSpec& partition) const {
  const PartitionAdmin* set = OverrideOf(partition.name);
  return set != nullptr ? set->state : partition.state;
}

const PartitionAdmin* Admission::OverrideOf(std::string_view partition) const {
  const auto it = std::find_if(overrides_.begin(), overrides_.end(),
                               [&](const PartitionAdmin& a) { return a.name == partition; });
  return it == overrides_.end() ? nullptr : &*it;
}

void Admission::AccountsChanged() {
  quotas_.Reindex();
  // A QOS limit set or cleared by sacctmgr changes which checks may make
  // jobs wait.
  waiting_checks_.clear();
  for (const auto& check : checks_) {
    if (check->MayMakeJobsWait(config_)) waiting_checks_.push_back(check);
  }
}

void Admission::Recount() {
  starts_.assign(static_cast<std::size_t>(pool_.PartitionCount()), true);
  for (const config::PartitionSpec& spec : config_.partitions) {
    if (const std::optional<alloc::PartitionId> id = pool_.FindPartition(spec.name)) {
      starts_[static_cast<std::size_t>(*id)] = config::StartsJobs(StateOf(spec));
    }
  }
}

absl::StatusOr<bool> Admission::SetState(const std::string& partition, config::PartitionState state,
                                         const Caller& caller, Millis now) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError(
        "only root and Operators= (in cohort.conf) may change a partition's state");
  }
  const config::PartitionSpec* spec = config_.FindPartition(partition);
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const config::PartitionSpec& p : config_.partitions) names.push_back(p.name);
    return absl::NotFoundError(
        fmt::format("no partition \"{}\"; partitions: {}", partition, fmt::join(names, ", ")));
  }
  const bool started_before = config::StartsJobs(StateOf(*spec));
  std::erase_if(overrides_, [&](const PartitionAdmin& a) { return a.name == partition; });
  if (state != spec->state) {
    overrides_.push_back({.name = partition, .state = state, .uid = caller.uid, .since = now});
  }
  Recount();
  return !started_before && config::StartsJobs(state);
}

std::vector<PartitionAdmin> Admission::Overrides() const { return overrides_; }

void Admission::RestoreOverrides(const std::vector<PartitionAdmin>& overrides) {
  overrides_.clear();
  for (const PartitionAdmin& set : overrides) {
    const config::PartitionSpec* spec = config_.FindPartition(set.name);
    if (spec != nullptr && spec->state != set.state) overrides_.push_back(set);
  }
  Recount();
}

absl::StatusOr<Job> Admission::Resolve(JobRequest request) const {
  const config::ClusterConfig& config = config_;
  Job job;
  const config::PartitionSpec* partition = request.partition.empty()
                                               ? config.DefaultPartition()
                                               : config.FindPartition(request.partition);
  if (partition == nullptr) {
    std::vector<std::string> names;
    for (const config::PartitionSpec& p : config.partitions) names.push_back(p.name);
    return absl::InvalidArgumentError(fmt::format("partition: no partition \"{}\"; partitions: {}",
                                                  request.partition, fmt::join(names, ", ")));
  }
  request.partition = partition->name;
  if (request.account.empty()) request.account = DefaultAccount(request, config);
  const std::string qos_name = request.qos.empty() ? DefaultQos(request, config) : request.qos;
  const config::QosSpec* qos = config.FindQos(qos_name);
  if (qos == nullptr) {
    std::vector<std::string> names;
    for (const config::QosSpec& q : config.qos) names.push_back(q.name);
    return absl::InvalidArgumentError(
        fmt::format("qos: no QOS \"{}\"; QOS: {}", qos_name, fmt::join(names, ", ")));
  }
  if (absl::Status s = CheckAllowed(request, config, *partition, *qos); !s.ok()) return s;
  if (!request.reservation.empty()) {
    const AdvanceReservation* r = reservations_.Find(request.reservation);
    if (r == nullptr) {
      return absl::NotFoundError(
          fmt::format("reservation: no reservation {}; scontrol show reservation lists them",
                      request.reservation));
    }
    if (!IsPrivileged(request, config) &&
        !ReservationBook::Permits(*r, request.user_name, request.account)) {
      return absl::PermissionDeniedError(fmt::format(
          "reservation: {} is for users {} and accounts {}; user {} with account {} may not use "
          "it",
          r->name, r->users.empty() ? "(none)" : fmt::format("{}", fmt::join(r->users, ",")),
          r->accounts.empty() ? "(none)" : fmt::format("{}", fmt::join(r->accounts, ",")),
          request.user_name, request.account));
    }
    if (!r->partition.empty() && r->partition != partition->name) {
      return absl::InvalidArgumentError(
          fmt::format("reservation: {} is in partition {}; submit with -p {}", r->name,
                      r->partition, r->partition));
    }
  }
  if (partition->max_nodes && request.nodes + request.spares > *partition->max_nodes) {
    return absl::InvalidArgumentError(fmt::format(
        "nodes: partition {} allows at most {} nodes per job; the job asks for {}{}",
        partition->name, *partition->max_nodes, request.nodes,
        request.spares > 0 ? fmt::format(" and {} spares (--spares)", request.spares) : ""));
  }
  if (absl::Status s = ResolveTime(request, *partition, *qos, job); !s.ok()) return s;
  if (request.deadline.count() > 0 && job.time_limit == kUnlimited) {
    return absl::InvalidArgumentError(
        "deadline: a job with a --deadline needs a time limit to tell whether it can end in "
        "time; give -t/--time");
  }
  if (absl::Status s = CheckQosAndBounds(request, *qos); !s.ok()) return s;
  job.qos = qos->name;

  alloc::GangRequest& gang = job.gang;
  gang.nodes = request.nodes;
  gang.tasks_per_node = request.tasks_per_node;
  gang.cpus_per_task = request.cpus_per_task;
  gang.overcommit = request.overcommit;
  gang.gpus_per_node = request.gpus_per_node;
  gang.memory_mb_per_node = request.memory_mb;
  gang.exclusivity = request.exclusivity;
  gang.partition = pool_.FindPartition(partition->name);
  gang.features = request.features;
  if (!request.gpu_type.empty()) {
    const std::string feature = alloc::GpuTypeFeature(request.gpu_type);
    const std::string_view prefix = "gpu:";
    if (!pool_.FeatureMask(std::span(&feature, 1))) {
      std::vector<std::string_view> types;
      for (const std::string& name : pool_.FeatureNames()) {
        if (name.starts_with(prefix)) types.push_back(std::string_view(name).substr(prefix.size()));
      }
      return absl::InvalidArgumentError(fmt::format(
          "--gres=gpu:{}:N: no node has GPUs of type {}; {}", request.gpu_type, request.gpu_type,
          types.empty() ? std::string("no node's Gres= names a type: ask for gpu:N without one")
                        : fmt::format("types here: {}", fmt::join(types, ", "))));
    }
    gang.features.push_back(feature);
  }
  if (request.switches > 0) gang.max_leaves = request.switches;
  if (request.segment > 0) gang.segment = request.segment;
  gang.spread_segments = request.spread_segments;
  gang.spares = request.spares;
  if (absl::Status s = ResolveNames(topology_, request.nodelist, "nodelist", gang.required_nodes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ResolveNames(topology_, request.exclude, "exclude", gang.excluded_nodes);
      !s.ok()) {
    return s;
  }
  if (absl::Status valid = alloc::ValidateGangRequest(gang); !valid.ok()) return valid;
  job.priority_tier = partition->priority_tier;
  job.request = std::move(request);
  job.request.qos = job.qos;
  return job;
}

void Admission::ShowHeld(Job& job, Effects& effects) {
  Lifecycle::SetReason(job,
                       job.sub == JobSubstate::kHeldAdmin ? PendingReason::kJobHeldAdmin
                                                          : PendingReason::kJobHeldUser,
                       job.sub == JobSubstate::kHeldAdmin
                           ? "held by an operator; an operator must release it"
                           : fmt::format("held; run cohort release {}", DisplayId(job)),
                       effects);
}

absl::Status Admission::CheckQueueing(const Job& job) const {
  if (const config::PartitionSpec* spec = config_.FindPartition(job.request.partition)) {
    if (const config::PartitionState state = StateOf(*spec); !config::TakesJobs(state)) {
      return absl::FailedPreconditionError(fmt::format(
          "partition: {} is {} and takes no new jobs; submit to another partition (-p; cohort "
          "nodes lists them), or ask an operator",
          spec->name, config::PartitionStateName(state)));
    }
  }
  for (const DependencyTerm& term : job.request.dependency.terms) {
    if (term.type == DependencyType::kSingleton) continue;
    if (book_.Find(term.job) == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "dependency: job {} is not known (jobs leave the queue 5 minutes after they end; see "
          "cohort history)",
          term.job));
    }
  }
  // The user's pending and running jobs that `same` says count (array
  // tasks one each).
  const auto queued_by_user = [&](const auto& same) {
    std::size_t queued = 0;
    for (const auto* index : {&book_.Pending(), &book_.Active()}) {
      for (const Job* other : *index) {
        if (other->request.uid == job.request.uid && same(*other)) {
          queued += other->array.pending.empty() ? 1 : other->array.pending.size();
        }
      }
    }
    return queued;
  };
  if (quotas_.MaxSubmitJobs(job)) {
    const std::size_t queued = queued_by_user(
        [&](const Job& other) { return other.request.account == job.request.account; });
    if (absl::Status s = quotas_.CheckQueueing(job, queued); !s.ok()) return s;
  }
  const config::QosSpec* qos = config_.FindQos(job.qos);
  if (qos == nullptr || !qos->max_submit_jobs_per_user) return absl::OkStatus();
  const std::size_t queued = queued_by_user([&](const Job& other) { return other.qos == job.qos; });
  const std::size_t adding = job.request.array.tasks.empty() ? 1 : job.request.array.tasks.size();
  if (queued + adding > static_cast<std::size_t>(*qos->max_submit_jobs_per_user)) {
    return absl::ResourceExhaustedError(fmt::format(
        "QOS {} allows {} queued jobs per user (MaxSubmitJobsPerUser); you have {} and this "
        "submission adds {}; wait for some to end or cancel some",
        job.qos, *qos->max_submit_jobs_per_user, queued, adding));
  }
  return absl::OkStatus();
}

absl::Status Admission::CheckSubmit(const Job& job, Millis now) const {
  // Submission counts no running jobs (empty maps allocate nothing): a
  // check that needs totals waits in Admit instead.
  if (absl::Status s = quotas_.CheckSubmit(job); !s.ok()) return s;
  const plugin::RunningTotals none;
  const plugin::AdmissionContext context{config_, none, now};
  for (const auto& check : checks_) {
    if (absl::Status s = check->CheckSubmit(context, job); !s.ok()) return s;
  }
  return absl::OkStatus();
}

int Admission::DependencyStatus(Job& job, std::string& why) {
  Dependency& dep = job.wait.dependency_left;
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
      for (const auto* index : {&book_.Active(), &book_.Pending()}) {
        for (const Job* other : *index) {
          if (status == 0) break;
          if (other->id != job.id && other->request.uid == job.request.uid &&
              other->request.name == job.request.name && (IsActive(*other) || other->id < job.id)) {
            status = 0;
            what = fmt::format("singleton: job {} of the same name \"{}\" is {}", DisplayId(*other),
                               job.request.name, JobStateName(other->state));
          }
        }
      }
    } else {
      const std::vector<JobId> ids = book_.Lookup(JobRef{term.job, term.array_task});
      const std::string target = term.array_task >= 0
                                     ? fmt::format("{}_{}", term.job, term.array_task)
                                     : std::to_string(term.job);
      bool started = false, ended = !ids.empty(), ok = true;
      std::string state = "unknown";
      for (const JobId id : ids) {
        const Job& t = book_.At(id);
        state = std::string(JobStateName(t.state));
        // An array's record with tasks not yet created has not ended.
        if (t.state != JobState::kPending || t.run.start_time.count() != 0) started = true;
        if (!IsFinished(t.state) || (t.id == t.array.job_id && !t.array.pending.empty())) {
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

bool Admission::ReservationWindowOpen(Job& job, Millis now, Effects& effects) {
  const AdvanceReservation* r = reservations_.Find(job.request.reservation);
  if (r == nullptr) {
    // Deleted since the job was queued: it cannot run as asked.
    job.reason = fmt::format("its reservation {} was deleted", job.request.reservation);
    life_.Apply(job, JobEvent::kCancelled, now, effects);
    job.array.pending.clear();
    return false;
  }
  if (now < r->start) {
    triggers_.WakeAt(r->start);
    Lifecycle::SetReason(
        job, PendingReason::kReservation,
        fmt::format("reservation {} starts in {}", r->name,
                    FormatSlurmTime(std::chrono::duration_cast<std::chrono::seconds>(
                        r->start - now + Millis(999)))),
        effects);
    return false;
  }
  const bool flex = (r->flags & kResvFlex) != 0;
  if (!flex && (job.time_limit == kUnlimited || now + ToMillis(job.time_limit) > r->end)) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(r->end - now);
    Lifecycle::SetReason(
        job, PendingReason::kReservation,
        fmt::format(
            "its time limit {} runs past reservation {}'s end in {}{}",
            FormatSlurmTime(job.time_limit), r->name, FormatSlurmTime(left),
            left >= std::chrono::minutes(1)
                ? fmt::format("; with --time={} or less it fits",
                              FormatSlurmTime(std::chrono::floor<std::chrono::minutes>(left)))
                : std::string()),
        effects);
    return false;
  }
  return true;
}

bool Admission::Eligible(Job& job, const PassCounts& counts, Millis now, Effects& effects) {
  if (IsHeld(job)) {
    ShowHeld(job, effects);
    return false;
  }
  if (job.gang.partition && !starts_[static_cast<std::size_t>(*job.gang.partition)]) {
    const config::PartitionSpec* spec = config_.FindPartition(job.request.partition);
    const config::PartitionState state =
        spec != nullptr ? StateOf(*spec) : config::PartitionState::kDown;
    Lifecycle::SetReason(
        job,
        state == config::PartitionState::kInactive ? PendingReason::kPartitionInactive
                                                   : PendingReason::kPartitionDown,
        fmt::format("partition {} is {}: it starts no jobs until an operator sets it UP or "
                    "DRAIN (scontrol update PartitionName={} State=UP)",
                    job.request.partition, config::PartitionStateName(state),
                    job.request.partition),
        effects);
    return false;
  }
  if (!job.wait.dependency_left.terms.empty()) {
    std::string why;
    const int status = DependencyStatus(job, why);
    if (status == 0) {
      Lifecycle::SetReason(job, PendingReason::kDependency, why, effects);
      return false;
    }
    if (status < 0) {
      if (job.request.kill_on_invalid_dep) {
        job.reason = fmt::format("its dependency can never be satisfied: {}", why);
        life_.Apply(job, JobEvent::kCancelled, now, effects);
        job.array.pending.clear();
      } else {
        Lifecycle::SetReason(job, PendingReason::kDependencyNeverSatisfied, why, effects);
      }
      return false;
    }
    job.wait.eligible_time = std::max(job.wait.eligible_time, now);
    Lifecycle::Changed(job, effects);
  }
  if (job.request.deadline.count() > 0 && job.time_limit != kUnlimited &&
      now + ToMillis(job.time_limit) > job.request.deadline) {
    // As Slurm's --deadline: a job that can no longer end in time goes.
    job.reason = fmt::format("its time limit {} no longer ends before its --deadline",
                             FormatSlurmTime(job.time_limit));
    life_.Apply(job, JobEvent::kCancelled, now, effects);
    job.array.pending.clear();
    return false;
  }
  if (job.request.begin > now) {
    triggers_.WakeAt(job.request.begin);
    Lifecycle::SetReason(
        job, PendingReason::kBeginTime,
        fmt::format("asked to begin in {}",
                    FormatSlurmTime(
                        std::chrono::duration_cast<std::chrono::seconds>(job.request.begin - now))),
        effects);
    return false;
  }
  if (job.wait.restart_after > now) {
    triggers_.WakeAt(job.wait.restart_after);
    Lifecycle::SetReason(
        job, PendingReason::kBeginTime,
        fmt::format("requeued after a node failure ({} so far); starts again in {} "
                    "(RequeueBackoff= doubles the wait at each failure)",
                    job.run.failure_restarts,
                    FormatSlurmTime(std::chrono::duration_cast<std::chrono::seconds>(
                        job.wait.restart_after - now + Millis(999)))),
        effects);
    return false;
  }
  if (!job.array.pending.empty() && job.request.array.max_running > 0) {
    const auto it = counts.array_running.find(job.array.job_id);
    if (it != counts.array_running.end() && it->second >= job.request.array.max_running) {
      Lifecycle::SetReason(
          job, PendingReason::kJobArrayTaskLimit,
          fmt::format("{} tasks of the array run and it allows {} at once (%{})", it->second,
                      job.request.array.max_running, job.request.array.max_running),
          effects);
      return false;
    }
  }
  if (!job.request.reservation.empty() && !ReservationWindowOpen(job, now, effects)) return false;
  if (counts.quotas != nullptr) {
    if (std::optional<plugin::Wait> wait = counts.quotas->Admit(job, counts.quota, now)) {
      Lifecycle::SetReason(job, wait->reason, wait->detail, effects);
      return false;
    }
  }
  if (waiting_checks_.empty()) return true;
  const plugin::AdmissionContext context{config_, counts.running, now};
  for (const auto& check : waiting_checks_) {
    if (std::optional<plugin::Wait> wait = check->Admit(context, job)) {
      Lifecycle::SetReason(job, wait->reason, wait->detail, effects);
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------- starting

}  // namespace cohort::engine
