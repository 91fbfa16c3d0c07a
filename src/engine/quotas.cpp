// SPDX-License-Identifier: Apache-2.0
#include "engine/quotas.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "engine/engine_support.h"

namespace cohort::engine {
namespace {

struct Demand {
  std::int64_t cpus = 0;
  std::int64_t nodes = 0;
  std::int64_t gpus = 0;
};

Demand DemandOf(const Job& job) {
  const std::int64_t nodes = job.gang.nodes + job.gang.spares;
  return {.cpus = nodes * alloc::CpusPerNode(job.gang), .nodes = nodes, .gpus = GpusAsked(job)};
}

// The seconds a job may run: its time limit; none when unlimited.
std::optional<double> LimitSeconds(const Job& job) {
  if (job.time_limit == kUnlimited) return std::nullopt;
  return static_cast<double>(job.time_limit.count());
}

AccountHeld AccountHeldBy(const Job& job, Millis now) {
  AccountHeld held{.jobs = 1,
                   .cpus = CpusHeld(job),
                   .nodes = static_cast<std::int64_t>(job.run.placement.grants.size()),
                   .gpus = GpusHeld(job),
                   .promised_gpu_seconds = 0,
                   .promised_cpu_seconds = 0};
  if (const std::optional<double> limit = LimitSeconds(job)) {
    const double ran = static_cast<double>((now - job.run.start_time).count()) / 1000.0;
    const double left = std::max(0.0, *limit - std::max(0.0, ran));
    held.promised_gpu_seconds = static_cast<double>(held.gpus) * left;
    held.promised_cpu_seconds = static_cast<double>(held.cpus) * left;
  }
  return held;
}

void Add(AccountHeld& to, const AccountHeld& held, int sign) {
  to.jobs += sign * held.jobs;
  to.cpus += sign * held.cpus;
  to.nodes += sign * held.nodes;
  to.gpus += sign * held.gpus;
  to.promised_gpu_seconds += sign * held.promised_gpu_seconds;
  to.promised_cpu_seconds += sign * held.promised_cpu_seconds;
}

// "2027-01-01": the UTC date of a time.
std::string Date(Millis at) {
  const std::chrono::year_month_day date(
      std::chrono::floor<std::chrono::days>(std::chrono::sys_time<Millis>(at)));
  return fmt::format("{}-{:02}-{:02}", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
}

// Amounts of a budget in the unit that suits its size: hours from one
// hour up, else minutes.
struct BudgetUnit {
  double seconds;         ///< of the unit
  std::string_view name;  ///< "hours"
};
BudgetUnit UnitFor(double budget_seconds) {
  return budget_seconds >= 3600 ? BudgetUnit{3600, "hours"} : BudgetUnit{60, "minutes"};
}
std::string In(const BudgetUnit& unit, double seconds) {
  return fmt::format("{:.1f}", seconds / unit.seconds);
}

// One TRES of a GrpTRES or MaxTRESPerJob limit, with the words its
// messages use.
struct TresCheck {
  const std::optional<std::int64_t>& limit;
  std::int64_t asked;
  std::int64_t held;
  std::string_view noun;  ///< "GPUs"
  std::string_view tres;  ///< "gres/gpu"
  PendingReason reason;
};

// `qos`: the limit is a QOS's, whose waits have reasons of their own.
std::array<TresCheck, 3> TresChecks(const config::TresCounts& limit, const Demand& demand,
                                    const AccountHeld& held, bool qos = false) {
  using enum PendingReason;
  return {
      {{limit.gpus, demand.gpus, held.gpus, "GPUs", "gres/gpu", qos ? kQosGrpGres : kAssocGrpGres},
       {limit.cpus, demand.cpus, held.cpus, "CPUs", "cpu", qos ? kQosGrpCpu : kAssocGrpCpu},
       {limit.nodes, demand.nodes, held.nodes, "nodes", "node",
        qos ? kQosGrpNode : kAssocGrpNode}}};
}

// What `limits` (an account's, a user's in one, or a QOS's) never let the
// job do: run at all (GrpJobs=0), hold what it asks (GrpTRES), or fit its
// time limit in the whole budget (GrpTRESMins). `who` names the holder.
absl::Status GrpRefusal(const config::AssocLimits& limits, const Job& job, const Demand& demand,
                        const std::string& who, std::string_view instead) {
  if (limits.grp_jobs && *limits.grp_jobs == 0) {
    return absl::FailedPreconditionError(
        fmt::format("the job can never run here: {} allows no running jobs (GrpJobs=0); {}, or "
                    "ask an operator",
                    who, instead));
  }
  for (const TresCheck& check : TresChecks(limits.grp_tres, demand, AccountHeld{})) {
    if (check.limit && check.asked > *check.limit) {
      return absl::FailedPreconditionError(fmt::format(
          "the job can never run here: {} allows {} {} at once (GrpTRES={}={}) and the job "
          "asks for {}; ask for fewer, or {}",
          who, *check.limit, check.noun, check.tres, *check.limit, check.asked, instead));
    }
  }
  const config::TresCounts& budgets = limits.grp_tres_mins;
  const std::optional<double> seconds = LimitSeconds(job);
  for (const auto& [limit, units, noun, tres] :
       {std::tuple{budgets.gpus, demand.gpus, "GPU", "gres/gpu"},
        std::tuple{budgets.cpus, demand.cpus, "CPU", "cpu"}}) {
    if (!limit || units == 0) continue;
    const double budget = static_cast<double>(*limit) * 60;
    const BudgetUnit unit = UnitFor(budget);
    if (!seconds) {
      return absl::FailedPreconditionError(fmt::format(
          "time: {} has a budget of {} {}-{} (GrpTRESMins={}={}) and a job without a time "
          "limit could use all of it; give -t/--time",
          who, In(unit, budget), noun, unit.name, tres, *limit));
    }
    const double cost = static_cast<double>(units) * *seconds;
    if (cost > budget) {
      return absl::FailedPreconditionError(fmt::format(
          "the job can never run here: it may use {} {}-{} ({} {}{} for {}) and {}'s whole "
          "budget is {} (GrpTRESMins={}={}); ask for less time or fewer {}s",
          In(unit, cost), noun, unit.name, units, noun, units == 1 ? "" : "s",
          FormatSlurmTime(job.time_limit), who, In(unit, budget), tres, *limit, noun));
    }
  }
  return absl::OkStatus();
}

// Whether `limits` make the job wait now: GrpJobs reached, or GrpTRES
// passed with what `held` holds. `whose` says whose jobs hold it.
std::optional<plugin::Wait> GrpWait(const config::AssocLimits& limits, const AccountHeld& held,
                                    const Demand& demand, const std::string& who,
                                    std::string_view whose, bool qos) {
  if (limits.grp_jobs && held.jobs >= *limits.grp_jobs) {
    return plugin::Wait{qos ? PendingReason::kQosGrpJobs : PendingReason::kAssocGrpJobs,
                        fmt::format("{} allows {} running jobs at once (GrpJobs={}); {} run ({})",
                                    who, *limits.grp_jobs, *limits.grp_jobs, held.jobs, whose)};
  }
  for (const TresCheck& check : TresChecks(limits.grp_tres, demand, held, qos)) {
    if (check.limit && check.held + check.asked > *check.limit) {
      return plugin::Wait{
          check.reason,
          fmt::format("{} allows {} {} at once (GrpTRES={}={}); {} hold {} and this job needs {}",
                      who, *check.limit, check.noun, check.tres, *check.limit, whose, check.held,
                      check.asked)};
    }
  }
  return std::nullopt;
}

}  // namespace

Quotas::Quotas(const config::ClusterConfig& config, const policy::FairShare& usage)
    : config_(config), usage_(usage) {
  Reindex();
}

void Quotas::Reindex() {
  index_.clear();
  parent_.assign(config_.accounts.size(), -1);
  active_ = false;
  budgets_ = false;
  qos_limits_ = false;
  for (const config::QosSpec& qos : config_.qos) qos_limits_ |= qos.limits.HasQuota();
  active_ = qos_limits_;
  for (std::size_t i = 0; i < config_.accounts.size(); ++i) {
    index_.emplace(config_.accounts[i].name, static_cast<int>(i));
  }
  for (std::size_t i = 0; i < config_.accounts.size(); ++i) {
    const config::AccountSpec& spec = config_.accounts[i];
    if (!spec.parent.empty()) parent_[i] = IndexOf(spec.parent);
    const auto note = [&](const config::AssocLimits& limits) {
      active_ |= limits.HasQuota();
      budgets_ |= !limits.grp_tres_mins.Empty();
    };
    note(spec.limits);
    for (const config::UserAssoc& user : spec.user_limits) note(user.limits);
  }
}

const config::QosSpec* Quotas::LimitedQos(const Job& job) const {
  if (!qos_limits_) return nullptr;
  const config::QosSpec* qos = config_.FindQos(job.qos);
  return qos != nullptr && qos->limits.HasQuota() ? qos : nullptr;
}

int Quotas::IndexOf(const std::string& account) const {
  const auto it = index_.find(account);
  return it == index_.end() ? -1 : it->second;
}

const config::AssocLimits* Quotas::UserLimits(int account, const std::string& user) const {
  for (const config::UserAssoc& assoc :
       config_.accounts[static_cast<std::size_t>(account)].user_limits) {
    if (assoc.user == user) return &assoc.limits;
  }
  return nullptr;
}

config::AssocLimits Quotas::MaxLimits(const Job& job) const {
  config::AssocLimits limits;
  const int a = IndexOf(job.request.account);
  if (a < 0) return limits;
  if (const config::AssocLimits* own = UserLimits(a, job.request.user_name)) limits = *own;
  // Bounded by the number of accounts: the tree has no loop, but a bound
  // costs nothing.
  std::size_t steps = 0;
  for (int at = a; at >= 0 && steps <= parent_.size(); at = parent_[static_cast<std::size_t>(at)]) {
    limits = config::Overlay(limits, config_.accounts[static_cast<std::size_t>(at)].limits);
    ++steps;
  }
  return limits;
}

void Quotas::Begin(QuotaTotals& totals, Millis now) const {
  totals.accounts.assign(config_.accounts.size(), AccountHeld{});
  totals.users.clear();
  totals.spent.clear();
  totals.qos.clear();
  if (!budgets_) return;
  totals.spent.assign(config_.accounts.size(), policy::PeriodUse{});
  usage_.ForEachAccountPeriodUse(now, [&](const std::string& name, const policy::PeriodUse& use) {
    std::size_t steps = 0;
    for (int at = IndexOf(name); at >= 0 && steps <= parent_.size();
         at = parent_[static_cast<std::size_t>(at)], ++steps) {
      totals.spent[static_cast<std::size_t>(at)].gpu_seconds += use.gpu_seconds;
      totals.spent[static_cast<std::size_t>(at)].cpu_seconds += use.cpu_seconds;
    }
  });
}

void Quotas::Count(QuotaTotals& totals, const Job& job, int sign, Millis now) const {
  const int a = IndexOf(job.request.account);
  if (totals.accounts.size() != parent_.size()) return;
  if (a < 0 && !qos_limits_) return;
  const AccountHeld held = AccountHeldBy(job, now);
  if (qos_limits_) Add(totals.qos[job.qos], held, sign);
  if (a < 0) return;
  std::size_t steps = 0;
  for (int at = a; at >= 0 && steps <= parent_.size();
       at = parent_[static_cast<std::size_t>(at)], ++steps) {
    Add(totals.accounts[static_cast<std::size_t>(at)], held, sign);
  }
  Add(totals.users[{a, job.request.uid}], held, sign);
}

absl::Status Quotas::CheckSubmit(const Job& job) const {
  if (!active_) return absl::OkStatus();
  const Demand demand = DemandOf(job);
  if (const config::QosSpec* qos = LimitedQos(job)) {
    for (const TresCheck& check : TresChecks(qos->limits.max_tres_per_job, demand, {})) {
      if (check.limit && check.asked > *check.limit) {
        return absl::FailedPreconditionError(fmt::format(
            "the job can never run here: QOS {} allows {} {} per job (MaxTRESPerJob={}={}) and "
            "the job asks for {}; ask for fewer, or use another --qos",
            qos->name, *check.limit, check.noun, check.tres, *check.limit, check.asked));
      }
    }
    if (absl::Status s = GrpRefusal(qos->limits, job, demand, fmt::format("QOS {}", qos->name),
                                    "use another --qos");
        !s.ok()) {
      return s;
    }
  }
  const int a = IndexOf(job.request.account);
  if (a < 0) return absl::OkStatus();
  const std::string& account = job.request.account;
  const config::AssocLimits max = MaxLimits(job);
  for (const TresCheck& check : TresChecks(max.max_tres_per_job, demand, AccountHeld{})) {
    if (check.limit && check.asked > *check.limit) {
      return absl::FailedPreconditionError(fmt::format(
          "the job can never run here: account {} allows {} {} per job "
          "(MaxTRESPerJob={}={}) and the job asks for {}; ask for fewer, or charge another "
          "account (-A)",
          account, *check.limit, check.noun, check.tres, *check.limit, check.asked));
    }
  }
  if (max.max_jobs && *max.max_jobs == 0) {
    return absl::FailedPreconditionError(fmt::format(
        "the job can never run here: account {} allows user {} no running jobs (MaxJobs=0); "
        "charge another account (-A), or ask an operator",
        account, job.request.user_name));
  }
  constexpr std::string_view kInstead = "charge another account (-A)";
  if (const config::AssocLimits* own = UserLimits(a, job.request.user_name)) {
    if (absl::Status s = GrpRefusal(
            *own, job, demand, fmt::format("user {} in account {}", job.request.user_name, account),
            kInstead);
        !s.ok()) {
      return s;
    }
  }
  std::size_t steps = 0;
  for (int at = a; at >= 0 && steps <= parent_.size();
       at = parent_[static_cast<std::size_t>(at)], ++steps) {
    const config::AccountSpec& spec = config_.accounts[static_cast<std::size_t>(at)];
    if (absl::Status s =
            GrpRefusal(spec.limits, job, demand, fmt::format("account {}", spec.name), kInstead);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::optional<int> Quotas::MaxSubmitJobs(const Job& job) const {
  if (!active_) return std::nullopt;
  return MaxLimits(job).max_submit_jobs;
}

absl::Status Quotas::CheckQueueing(const Job& job, std::size_t queued) const {
  const std::optional<int> max_submit_jobs = MaxSubmitJobs(job);
  if (!max_submit_jobs) return absl::OkStatus();
  const std::size_t adding = job.request.array.tasks.empty() ? 1 : job.request.array.tasks.size();
  if (queued + adding > static_cast<std::size_t>(*max_submit_jobs)) {
    return absl::ResourceExhaustedError(fmt::format(
        "account {} allows {} queued jobs per user (MaxSubmitJobs={}); you have {} there and "
        "this submission adds {}; wait for some to end, cancel some, or charge another account "
        "(-A)",
        job.request.account, *max_submit_jobs, *max_submit_jobs, queued, adding));
  }
  return absl::OkStatus();
}

std::optional<plugin::Wait> Quotas::AdmitBudget(const Job& job, const config::AssocLimits& limits,
                                                const policy::PeriodUse& spent,
                                                const AccountHeld& held, const std::string& who,
                                                bool qos, Millis now) const {
  if (limits.grp_tres_mins.Empty()) return std::nullopt;
  const Demand demand = DemandOf(job);
  const std::optional<double> seconds = LimitSeconds(job);
  const config::UsageResetPeriod period = config_.usage_reset_period;
  const std::string resets =
      period == config::UsageResetPeriod::kNone
          ? std::string("the budget does not start again (PriorityUsageResetPeriod=NONE)")
          : fmt::format("the budget starts again on {} (PriorityUsageResetPeriod={})",
                        Date(config::NextPeriodStart(period, now)),
                        config::UsageResetPeriodName(period));
  using enum PendingReason;
  for (const auto& [limit, used, promised, units, noun, tres, reason] :
       {std::tuple{limits.grp_tres_mins.gpus, spent.gpu_seconds, held.promised_gpu_seconds,
                   demand.gpus, "GPU", "gres/gpu", qos ? kQosGrpGresMinutes : kAssocGrpGresMinutes},
        std::tuple{limits.grp_tres_mins.cpus, spent.cpu_seconds, held.promised_cpu_seconds,
                   demand.cpus, "CPU", "cpu", qos ? kQosGrpCpuMinutes : kAssocGrpCpuMinutes}}) {
    if (!limit || units == 0) continue;
    const double budget = static_cast<double>(*limit) * 60;
    const double cost = seconds ? static_cast<double>(units) * *seconds : INFINITY;
    if (used + promised + cost <= budget) continue;
    const BudgetUnit unit = UnitFor(budget);
    std::string detail = fmt::format("{} has used {} of its {} {}-{} ({:.0f}%, GrpTRESMins={}={})",
                                     who, In(unit, used), In(unit, budget), noun, unit.name,
                                     std::min(999.0, 100.0 * used / budget), tres, *limit);
    if (promised > 0) {
      detail += fmt::format("; its running jobs may use {} more", In(unit, promised));
    }
    if (seconds) {
      detail += fmt::format("; this job may use up to {} ({} {}{} for {})", In(unit, cost), units,
                            noun, units == 1 ? "" : "s", FormatSlurmTime(job.time_limit));
    } else {
      detail += "; this job has no time limit";
    }
    const double left = budget - used - promised;
    const auto fits = static_cast<std::int64_t>(left / static_cast<double>(units));
    if (fits >= 60) {
      detail += fmt::format("; with --time={} or less it fits",
                            FormatSlurmTime(std::chrono::seconds(fits / 60 * 60)));
    }
    detail += "; " + resets;
    return plugin::Wait{reason, std::move(detail)};
  }
  return std::nullopt;
}

std::optional<plugin::Wait> Quotas::Admit(const Job& job, const QuotaTotals& totals,
                                          Millis now) const {
  if (!active_ || totals.accounts.size() != parent_.size()) return std::nullopt;
  const Demand demand = DemandOf(job);
  static const AccountHeld kNone;
  if (const config::QosSpec* qos = LimitedQos(job)) {
    const auto it = totals.qos.find(qos->name);
    const AccountHeld& held = it == totals.qos.end() ? kNone : it->second;
    const std::string who = fmt::format("QOS {}", qos->name);
    if (auto wait = GrpWait(qos->limits, held, demand, who, "its jobs", true)) return wait;
    if (auto wait = AdmitBudget(job, qos->limits, usage_.QosPeriodUse(qos->name, now), held, who,
                                true, now)) {
      return wait;
    }
  }
  const int a = IndexOf(job.request.account);
  if (a < 0) return std::nullopt;
  const std::string& account = job.request.account;
  const auto user_it = totals.users.find({a, job.request.uid});
  const AccountHeld& user_held = user_it == totals.users.end() ? kNone : user_it->second;

  const config::AssocLimits max = MaxLimits(job);
  if (max.max_jobs && user_held.jobs >= *max.max_jobs) {
    return plugin::Wait{
        PendingReason::kAssocMaxJobs,
        fmt::format("account {} allows user {} {} running jobs at once "
                    "(MaxJobs={}); {} run",
                    account, job.request.user_name, *max.max_jobs, *max.max_jobs, user_held.jobs)};
  }
  if (const config::AssocLimits* own = UserLimits(a, job.request.user_name)) {
    const std::string who = fmt::format("user {} in account {}", job.request.user_name, account);
    if (auto wait = GrpWait(*own, user_held, demand, who, "the user's jobs there", false)) {
      return wait;
    }
    if (auto wait =
            AdmitBudget(job, *own, usage_.UserPeriodUse(account, job.request.user_name, now),
                        user_held, who, false, now)) {
      return wait;
    }
  }
  std::size_t steps = 0;
  for (int at = a; at >= 0 && steps <= parent_.size();
       at = parent_[static_cast<std::size_t>(at)], ++steps) {
    const auto i = static_cast<std::size_t>(at);
    const config::AccountSpec& spec = config_.accounts[i];
    const std::string who =
        at == a ? fmt::format("account {}", spec.name)
                : fmt::format("account {}, above the job's account {},", spec.name, account);
    if (auto wait = GrpWait(spec.limits, totals.accounts[i], demand, who,
                            "its jobs and those of the accounts under it", false)) {
      return wait;
    }
    const policy::PeriodUse spent = i < totals.spent.size() ? totals.spent[i] : policy::PeriodUse{};
    if (auto wait = AdmitBudget(job, spec.limits, spent, totals.accounts[i],
                                fmt::format("account {}", spec.name), false, now)) {
      return wait;
    }
  }
  return std::nullopt;
}

}  // namespace cohort::engine
