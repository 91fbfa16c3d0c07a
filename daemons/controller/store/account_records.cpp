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
  return limits;
}

}  // namespace

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
