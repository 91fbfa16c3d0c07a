// SPDX-License-Identifier: Apache-2.0
#include "rpc/priority_rpcs.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "controller_log.h"
#include "rpc/authenticator.h"
#include "store/account_records.h"

namespace cohort::controller {

void PriorityRpcs::GetPriorities(v1::PriorityRequest& request, const Identity& who,
                                 Reply<v1::PriorityResponse> reply) {
  const Engine& engine = state_.engine;
  std::vector<JobId> ids;
  if (request.job_refs().empty()) {
    ids = engine.PendingOrder();
  } else {
    for (const std::string& text : request.job_refs()) {
      absl::StatusOr<JobRef> ref = ParseJobRef(text);
      if (!ref.ok()) {
        outbox_.Respond<v1::PriorityResponse>(std::move(reply), ref.status());
        return;
      }
      const std::vector<JobId> found = engine.Lookup(*ref);
      if (found.empty()) {
        outbox_.Respond<v1::PriorityResponse>(
            std::move(reply),
            absl::NotFoundError(fmt::format("job {} not found; see cohort queue", text)));
        return;
      }
      ids.insert(ids.end(), found.begin(), found.end());
    }
  }
  const config::PriorityWeights& w = state_.config.priority;
  v1::PriorityResponse response;
  response.set_weight_age(w.age);
  response.set_weight_fairshare(w.fairshare);
  response.set_weight_job_size(w.job_size);
  response.set_weight_partition(w.partition);
  response.set_weight_qos(w.qos);
  const Millis now = ControllerState::Now();
  for (const JobId id : ids) {
    const Job* job = engine.FindJob(id);
    if (job != nullptr && job->state == JobState::kPending &&
        MaySeeJob(who, job->request.uid, state_.config.private_data)) {
      AddPriority(*job, now, response);
    }
  }
  std::stable_sort(
      response.mutable_jobs()->begin(), response.mutable_jobs()->end(),
      [](const v1::JobPriority& a, const v1::JobPriority& b) { return a.total() > b.total(); });
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::PriorityResponse>(std::move(response)));
}

void PriorityRpcs::AddPriority(const Job& job, Millis now, v1::PriorityResponse& response) const {
  const config::PriorityWeights& w = state_.config.priority;
  const policy::PriorityFactors f = state_.engine.PriorityOf(job, now);
  v1::JobPriority* p = response.add_jobs();
  p->set_job_id(job.id);
  p->set_display_id(DisplayId(job));
  p->set_user_name(job.request.user_name);
  p->set_account(job.request.account);
  p->set_partition(job.request.partition);
  p->set_qos(job.qos);
  p->set_total(f.total);
  p->set_age(w.age * f.age);
  p->set_fairshare(w.fairshare * f.fairshare);
  p->set_job_size(w.job_size * f.job_size);
  p->set_partition_factor(w.partition * f.partition);
  p->set_qos_factor(w.qos * f.qos);
  p->set_age_raw(f.age);
  p->set_fairshare_raw(f.fairshare);
  p->set_job_size_raw(f.job_size);
  p->set_partition_raw(f.partition);
  p->set_qos_raw(f.qos);
}

void PriorityRpcs::GetShares(v1::SharesRequest& /*request*/, const Identity& who,
                             Reply<v1::SharesResponse> reply) {
  v1::SharesResponse response;
  response.set_half_life_s(state_.config.priority.decay_half_life.count());
  for (const policy::ShareRow& row :
       state_.engine.Usage().Rows(state_.engine.Config(), ControllerState::Now())) {
    // PrivateData=usage: a user sees the accounts' rows and their own.
    if (state_.config.private_data.usage && !who.is_operator && !row.user.empty() &&
        row.user != who.user_name) {
      continue;
    }
    v1::AccountShare* out = response.add_rows();
    out->set_account(row.account);
    out->set_user(row.user);
    out->set_shares(row.shares);
    out->set_norm_shares(row.norm_shares);
    out->set_usage_gpu_seconds(row.usage);
    out->set_norm_usage(row.norm_usage);
    out->set_factor(row.factor);
    out->set_parent(row.parent);
    out->set_depth(row.depth);
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::SharesResponse>(std::move(response)));
}

namespace {

void TransactionOut(const AccountAudit& entry, v1::AccountTransaction& out) {
  out.set_time_ms(entry.time.count());
  out.set_uid(entry.uid);
  out.set_action(entry.action);
  out.set_where(entry.where);
  out.set_info(entry.info);
  out.set_actor(UserNameOf(entry.uid));
}

}  // namespace

void PriorityRpcs::ListAccounts(v1::ListAccountsRequest& /*request*/, const Identity& /*who*/,
                                Reply<v1::ListAccountsResponse> reply) {
  const config::ClusterConfig& config = state_.engine.Config();
  const policy::FairShare& usage = state_.engine.Usage();
  const Millis now = ControllerState::Now();
  v1::ListAccountsResponse response;
  response.set_usage_reset_period(
      std::string(config::UsageResetPeriodName(config.usage_reset_period)));
  response.set_period_start_ms(config::PeriodStart(config.usage_reset_period, now).count());
  response.set_next_period_ms(config::NextPeriodStart(config.usage_reset_period, now).count());
  // Use this period, each account's with the accounts under it.
  std::map<std::string, policy::PeriodUse> spent;
  usage.ForEachAccountPeriodUse(now, [&](const std::string& name, const policy::PeriodUse& use) {
    const std::vector<const config::AccountSpec*> chain = config.AccountChain(name);
    for (const config::AccountSpec* at : chain) {
      spent[at->name].gpu_seconds += use.gpu_seconds;
      spent[at->name].cpu_seconds += use.cpu_seconds;
    }
  });
  std::map<std::string, std::vector<const config::AccountSpec*>> children;
  for (const config::AccountSpec& spec : config.accounts) children[spec.parent].push_back(&spec);
  for (auto& [parent, specs] : children) {
    std::sort(specs.begin(), specs.end(),
              [](const auto* a, const auto* b) { return a->name < b->name; });
  }
  std::set<std::string> seen;  // the tree has no loop; a bound costs nothing
  const auto add = [&](const auto& self, const std::string& parent, int depth) -> void {
    for (const config::AccountSpec* spec : children[parent]) {
      if (!seen.insert(spec->name).second) continue;
      v1::Association& line = *response.add_associations();
      AccountLine(*spec, line);
      line.set_depth(depth);
      line.set_period_gpu_seconds(spent[spec->name].gpu_seconds);
      line.set_period_cpu_seconds(spent[spec->name].cpu_seconds);
      for (const std::string& user : spec->users) {
        v1::Association& user_line = *response.add_associations();
        UserLine(*spec, user, user_line);
        user_line.set_depth(depth + 1);
        const policy::PeriodUse own = usage.UserPeriodUse(spec->name, user, now);
        user_line.set_period_gpu_seconds(own.gpu_seconds);
        user_line.set_period_cpu_seconds(own.cpu_seconds);
        user_line.set_is_default(
            std::any_of(config.default_accounts.begin(), config.default_accounts.end(),
                        [&](const auto& d) { return d.first == user && d.second == spec->name; }));
      }
      self(self, spec->name, depth + 1);
    }
  };
  add(add, "", 0);
  std::vector<const config::QosSpec*> qos;
  for (const config::QosSpec& q : config.qos) qos.push_back(&q);
  std::sort(qos.begin(), qos.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const config::QosSpec* q : qos) {
    v1::Qos& out = *response.add_qos();
    QosOut(*q, out);
    const policy::PeriodUse use = usage.QosPeriodUse(q->name, now);
    out.set_period_gpu_seconds(use.gpu_seconds);
    out.set_period_cpu_seconds(use.cpu_seconds);
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::ListAccountsResponse>(std::move(response)));
}

void PriorityRpcs::UpdateAccounts(v1::UpdateAccountsRequest& request, const Identity& who,
                                  Reply<v1::UpdateAccountsResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing accounts"); !trusted.ok()) {
    outbox_.Respond<v1::UpdateAccountsResponse>(std::move(reply), trusted);
    return;
  }
  AccountUpdate update;
  update.verb = request.verb();
  update.entity = request.entity();
  update.names.assign(request.names().begin(), request.names().end());
  update.accounts.assign(request.accounts().begin(), request.accounts().end());
  for (const std::string& word : request.set()) {
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      outbox_.Respond<v1::UpdateAccountsResponse>(
          std::move(reply), absl::InvalidArgumentError(fmt::format(
                                "\"{}\": settings are Key=Value, as GrpTRES=gres/gpu=8", word)));
      return;
    }
    update.set.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  Effects effects;
  absl::StatusOr<std::vector<AccountAudit>> done =
      state_.engine.UpdateAccounts(update, who.AsCaller(), ControllerState::Now(), effects);
  if (!done.ok()) {
    outbox_.Respond<v1::UpdateAccountsResponse>(std::move(reply), done.status());
    return;
  }
  v1::UpdateAccountsResponse response;
  for (const AccountAudit& entry : *done) {
    TransactionOut(entry, *response.add_done());
    Log("controller")
        ->info("account_update action=\"{}\" where=\"{}\" info=\"{}\" by_uid={}", entry.action,
               entry.where, entry.info, who.uid);
  }
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::UpdateAccountsResponse>(std::move(response)));
}

void PriorityRpcs::ListTransactions(v1::ListTransactionsRequest& request, const Identity& /*who*/,
                                    Reply<v1::ListTransactionsResponse> reply) {
  const std::vector<AccountAudit>& audit = state_.engine.AccountsAudit();
  const std::size_t limit =
      request.limit() > 0 ? static_cast<std::size_t>(request.limit()) : audit.size();
  v1::ListTransactionsResponse response;
  for (std::size_t i = audit.size() - std::min(limit, audit.size()); i < audit.size(); ++i) {
    TransactionOut(audit[i], *response.add_transactions());
  }
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::ListTransactionsResponse>(std::move(response)));
}

}  // namespace cohort::controller
