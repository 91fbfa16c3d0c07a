// SPDX-License-Identifier: Apache-2.0
#include "store/account_records.h"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::controller {
namespace {

void LimitsOut(const config::AssocLimits& limits, v1::Association& out) {
  out.set_grp_tres(config::FormatTres(limits.grp_tres));
  out.set_grp_tres_mins(config::FormatTres(limits.grp_tres_mins));
  out.set_max_tres_per_job(config::FormatTres(limits.max_tres_per_job));
  if (limits.grp_jobs) out.set_grp_jobs(*limits.grp_jobs);
  if (limits.max_jobs) out.set_max_jobs(*limits.max_jobs);
  if (limits.max_submit_jobs) out.set_max_submit_jobs(*limits.max_submit_jobs);
  for (const std::string& name : limits.qos) out.add_qos(name);
  out.set_default_qos(limits.default_qos);
}

config::AssocLimits LimitsIn(const v1::Association& line, std::vector<std::string>& warnings) {
  config::AssocLimits limits;
  const auto set = [&](std::string_view key, const std::string& value) {
    if (value.empty()) return;
    if (absl::Status s = config::SetLimit(key, value, limits); !s.ok()) {
      warnings.push_back(fmt::format("{}{}: {} dropped: {}", line.account(),
                                     line.user().empty() ? "" : " user " + line.user(), key,
                                     std::string(s.message())));
    }
  };
  set("GrpTRES", line.grp_tres());
  set("GrpTRESMins", line.grp_tres_mins());
  set("MaxTRESPerJob", line.max_tres_per_job());
  if (line.has_grp_jobs()) set("GrpJobs", std::to_string(line.grp_jobs()));
  if (line.has_max_jobs()) set("MaxJobs", std::to_string(line.max_jobs()));
  if (line.has_max_submit_jobs()) set("MaxSubmitJobs", std::to_string(line.max_submit_jobs()));
  if (line.qos_size() > 0) {
    std::string names;
    for (const std::string& name : line.qos()) names += (names.empty() ? "" : ",") + name;
    set("QOS", names);
  }
  set("DefaultQOS", line.default_qos());
  return limits;
}

}  // namespace

void QosOut(const config::QosSpec& qos, v1::Qos& out) {
  out.set_name(qos.name);
  out.set_priority(qos.priority);
  if (qos.max_jobs_per_user) out.set_max_jobs_per_user(*qos.max_jobs_per_user);
  if (qos.max_submit_jobs_per_user) out.set_max_submit_jobs_per_user(*qos.max_submit_jobs_per_user);
  if (qos.max_gpus_per_user) out.set_max_gpus_per_user(*qos.max_gpus_per_user);
  if (qos.max_gpus_per_account) out.set_max_gpus_per_account(*qos.max_gpus_per_account);
  if (qos.max_wall) out.set_max_wall_s(qos.max_wall->count());
  for (const std::string& victim : qos.preempt) out.add_preempt(victim);
  if (qos.preempt_mode)
    out.set_preempt_mode(std::string(config::PreemptModeName(*qos.preempt_mode)));
  if (qos.grace_time) out.set_grace_time_s(qos.grace_time->count());
  if (qos.preempt_signal) out.set_preempt_signal(*qos.preempt_signal);
  out.set_grp_tres(config::FormatTres(qos.limits.grp_tres));
  out.set_grp_tres_mins(config::FormatTres(qos.limits.grp_tres_mins));
  if (qos.limits.grp_jobs) out.set_grp_jobs(*qos.limits.grp_jobs);
  out.set_max_tres_per_job(config::FormatTres(qos.limits.max_tres_per_job));
  out.set_description(qos.description);
  out.set_managed(qos.managed);
  for (const std::string& a : qos.allow_accounts) out.add_allow_accounts(a);
  for (const std::string& u : qos.allow_users) out.add_allow_users(u);
}

config::QosSpec QosIn(const v1::Qos& in, std::vector<std::string>& warnings) {
  config::QosSpec qos;
  qos.name = in.name();
  qos.managed = in.managed();
  qos.description = in.description();
  const auto set = [&](std::string_view key, const std::string& value) {
    if (value.empty()) return;
    if (absl::Status s = config::SetQosKey(key, value, qos); !s.ok()) {
      warnings.push_back(
          fmt::format("QOS {}: {} dropped: {}", in.name(), key, std::string(s.message())));
    }
  };
  set("Priority", std::to_string(in.priority()));
  if (in.has_max_jobs_per_user()) set("MaxJobsPerUser", std::to_string(in.max_jobs_per_user()));
  if (in.has_max_submit_jobs_per_user()) {
    set("MaxSubmitJobsPerUser", std::to_string(in.max_submit_jobs_per_user()));
  }
  if (in.has_max_gpus_per_user()) set("MaxGpusPerUser", std::to_string(in.max_gpus_per_user()));
  if (in.has_max_gpus_per_account()) {
    set("MaxGpusPerAccount", std::to_string(in.max_gpus_per_account()));
  }
  // Times and the signal as this build's bounds allow; out of them, dropped.
  constexpr std::int64_t kMaxSeconds = 366LL * 24 * 3600 * 100;
  if (in.has_max_wall_s() && in.max_wall_s() > 0 && in.max_wall_s() <= kMaxSeconds) {
    qos.max_wall = std::chrono::seconds(in.max_wall_s());
  }
  set("PreemptMode", in.preempt_mode());
  if (in.has_grace_time_s() && in.grace_time_s() >= 0 && in.grace_time_s() <= kMaxSeconds) {
    qos.grace_time = std::chrono::seconds(in.grace_time_s());
  }
  if (in.has_preempt_signal() && in.preempt_signal() >= 1 && in.preempt_signal() <= 64) {
    qos.preempt_signal = in.preempt_signal();
  }
  qos.preempt.assign(in.preempt().begin(), in.preempt().end());
  qos.allow_accounts.assign(in.allow_accounts().begin(), in.allow_accounts().end());
  qos.allow_users.assign(in.allow_users().begin(), in.allow_users().end());
  const auto limit = [&](std::string_view key, const std::string& value) {
    if (value.empty()) return;
    if (absl::Status s = config::SetLimit(key, value, qos.limits); !s.ok()) {
      warnings.push_back(
          fmt::format("QOS {}: {} dropped: {}", in.name(), key, std::string(s.message())));
    }
  };
  limit("GrpTRES", in.grp_tres());
  limit("GrpTRESMins", in.grp_tres_mins());
  if (in.has_grp_jobs()) limit("GrpJobs", std::to_string(in.grp_jobs()));
  limit("MaxTRESPerJob", in.max_tres_per_job());
  return qos;
}

void AccountLine(const config::AccountSpec& spec, v1::Association& out) {
  out.set_account(spec.name);
  out.set_parent(spec.parent);
  out.set_shares(spec.shares);
  LimitsOut(spec.limits, out);
  out.set_description(spec.description);
  out.set_organization(spec.organization);
  out.set_managed(spec.managed);
}

void UserLine(const config::AccountSpec& spec, const std::string& user, v1::Association& out) {
  out.set_account(spec.name);
  out.set_user(user);
  out.set_parent(spec.name);
  for (const auto& [name, shares] : spec.user_shares) {
    if (name == user) out.set_shares(shares);
  }
  for (const config::UserAssoc& assoc : spec.user_limits) {
    if (assoc.user == user) LimitsOut(assoc.limits, out);
  }
  out.set_managed(std::find(spec.managed_users.begin(), spec.managed_users.end(), user) !=
                  spec.managed_users.end());
}

v1::AccountingRecord ToRecord(const AccountingState& state) {
  v1::AccountingRecord record;
  for (const config::AccountSpec& spec : state.accounts) {
    AccountLine(spec, *record.add_associations());
    for (const std::string& user : spec.managed_users) {
      v1::Association& line = *record.add_associations();
      UserLine(spec, user, line);
      line.set_is_default(
          std::any_of(state.default_accounts.begin(), state.default_accounts.end(),
                      [&](const auto& d) { return d.first == user && d.second == spec.name; }));
    }
  }
  for (const config::QosSpec& qos : state.qos) QosOut(qos, *record.add_qos());
  for (const AccountAudit& entry : state.audit) {
    v1::AccountTransaction& out = *record.add_audit();
    out.set_time_ms(entry.time.count());
    out.set_uid(entry.uid);
    out.set_action(entry.action);
    out.set_where(entry.where);
    out.set_info(entry.info);
  }
  return record;
}

AccountingState FromRecord(const v1::AccountingRecord& record, std::vector<std::string>& warnings) {
  AccountingState state;
  for (const v1::Association& line : record.associations()) {
    if (line.user().empty()) {
      config::AccountSpec& spec = state.accounts.emplace_back();
      spec.name = line.account();
      spec.parent = line.parent();
      spec.shares = std::max(1, line.shares());
      spec.limits = LimitsIn(line, warnings);
      spec.description = line.description();
      spec.organization = line.organization();
      spec.managed = line.managed();
      continue;
    }
    if (state.accounts.empty() || state.accounts.back().name != line.account()) {
      warnings.push_back(fmt::format("user {} of account {} is dropped: no account line before it",
                                     line.user(), line.account()));
      continue;
    }
    config::AccountSpec& spec = state.accounts.back();
    spec.users.push_back(line.user());
    spec.managed_users.push_back(line.user());
    if (line.shares() > 0) spec.user_shares.emplace_back(line.user(), line.shares());
    config::AssocLimits limits = LimitsIn(line, warnings);
    if (!limits.Empty()) {
      spec.user_limits.push_back({.user = line.user(), .limits = std::move(limits)});
    }
    if (line.is_default()) state.default_accounts.emplace_back(line.user(), line.account());
  }
  for (const v1::Qos& qos : record.qos()) state.qos.push_back(QosIn(qos, warnings));
  for (const v1::AccountTransaction& t : record.audit()) {
    state.audit.push_back({.time = Millis(t.time_ms()),
                           .uid = t.uid(),
                           .action = t.action(),
                           .where = t.where(),
                           .info = t.info()});
  }
  return state;
}

}  // namespace cohort::controller
