// SPDX-License-Identifier: Apache-2.0
#include "cohort/policy/fair_share.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace cohort::policy {
namespace {

// Usage below this many resource-seconds counts as none: a long-idle
// account's usage decays towards denormal numbers, whose ratios would be
// noise and whose arithmetic is slow.
constexpr double kNegligibleUsage = 1e-6;

// Shares of an account: its Shares= line, else 1. At least 1 even in a
// config built in code, so that no factor divides by zero.
int AccountShares(const config::ClusterConfig& config, const std::string& account) {
  const config::AccountSpec* spec = config.FindAccount(account);
  return spec != nullptr ? std::max(spec->shares, 1) : 1;
}

// Shares of a user inside an account with UserShares=: listed, else 1.
int UserShares(const config::AccountSpec& spec, const std::string& user) {
  for (const auto& [name, shares] : spec.user_shares) {
    if (name == user) return std::max(shares, 1);
  }
  return 1;
}

// 2^(−usage/shares), with both normalised; shares are never 0 here.
double ShareFactor(double norm_usage, double norm_shares) {
  return std::exp2(-norm_usage / norm_shares);
}

}  // namespace

FairShare::FairShare(std::chrono::seconds half_life) : half_life_(half_life) {}

double FairShare::At(const Decayed& d, Millis now) const {
  if (d.value <= 0) return 0;
  // A non-positive half-life cannot decay anything; kUnlimited
  // (PriorityDecayHalfLife=UNLIMITED) means no decay, exactly.
  if (now <= d.as_of || half_life_ <= std::chrono::seconds(0) || half_life_ == kUnlimited) {
    return d.value;
  }
  const double elapsed_s = static_cast<double>((now - d.as_of).count()) / 1000.0;
  const double value = d.value * std::exp2(-elapsed_s / static_cast<double>(half_life_.count()));
  return value < kNegligibleUsage ? 0 : value;
}

void FairShare::Add(Decayed& d, double amount, Millis now) const {
  const Millis at = std::max(now, d.as_of);
  d.value = At(d, at) + amount;
  d.as_of = at;
}

void FairShare::Charge(const std::string& account, const std::string& user, double resource_seconds,
                       Millis now) {
  // `!(x > 0)` also drops NaN.
  if (!(resource_seconds > 0) || std::isinf(resource_seconds)) return;
  Add(accounts_[account], resource_seconds, now);
  // An empty user would read back as the account's total in a Snapshot.
  if (!user.empty()) Add(users_[{account, user}], resource_seconds, now);
}

double FairShare::Usage(const std::string& account, Millis now) const {
  const auto it = accounts_.find(account);
  return it == accounts_.end() ? 0 : At(it->second, now);
}

double FairShare::UserUsage(const std::string& account, const std::string& user, Millis now) const {
  const auto it = users_.find({account, user});
  return it == users_.end() ? 0 : At(it->second, now);
}

double FairShare::Factor(const config::ClusterConfig& config, const std::string& account,
                         const std::string& user, Millis now) const {
  // The siblings are the configured accounts, the accounts with usage and
  // this one. Counted without building that set: this runs for every
  // pending job of every scheduling pass.
  double total_shares = 0;
  std::size_t configured_with_usage = 0;
  for (const config::AccountSpec& spec : config.accounts) {
    total_shares += std::max(spec.shares, 1);
    if (accounts_.contains(spec.name)) ++configured_with_usage;
  }
  total_shares += static_cast<double>(accounts_.size() - configured_with_usage);  // 1 share each
  const config::AccountSpec* spec = config.FindAccount(account);
  if (spec == nullptr && !accounts_.contains(account)) total_shares += 1;
  double total_usage = 0;
  for (const auto& [name, d] : accounts_) total_usage += At(d, now);
  const double norm_shares = AccountShares(config, account) / total_shares;
  const double norm_usage = total_usage > 0 ? Usage(account, now) / total_usage : 0;
  const double account_factor = ShareFactor(norm_usage, norm_shares);
  if (spec == nullptr || spec->user_shares.empty()) return account_factor;

  // The same inside the account: listed users, users with usage, this one.
  double user_total_shares = 0;
  std::size_t listed_with_usage = 0;
  bool user_counted = false;
  for (const auto& [name, shares] : spec->user_shares) {
    user_total_shares += std::max(shares, 1);
    if (users_.contains({account, name})) ++listed_with_usage;
    user_counted |= name == user;
  }
  std::size_t with_usage = 0;
  double user_total_usage = 0;
  for (auto it = users_.lower_bound({account, std::string()});
       it != users_.end() && it->first.first == account; ++it) {
    ++with_usage;
    user_total_usage += At(it->second, now);
    user_counted |= it->first.second == user;
  }
  user_total_shares += static_cast<double>(with_usage - listed_with_usage);
  if (!user_counted) user_total_shares += 1;
  const double user_norm_shares = UserShares(*spec, user) / user_total_shares;
  const double user_norm_usage =
      user_total_usage > 0 ? UserUsage(account, user, now) / user_total_usage : 0;
  return account_factor * ShareFactor(user_norm_usage, user_norm_shares);
}

std::vector<ShareRow> FairShare::Rows(const config::ClusterConfig& config, Millis now) const {
  // Users per account: listed in UserShares= or with usage.
  std::map<std::string, std::set<std::string>> accounts;
  for (const config::AccountSpec& spec : config.accounts) {
    std::set<std::string>& users = accounts[spec.name];
    for (const auto& [user, shares] : spec.user_shares) users.insert(user);
  }
  for (const auto& [name, usage] : accounts_) accounts[name];
  for (const auto& [key, usage] : users_) accounts[key.first].insert(key.second);

  double total_shares = 0;
  double total_usage = 0;
  for (const auto& [name, users] : accounts) {
    total_shares += AccountShares(config, name);
    total_usage += Usage(name, now);
  }

  // The siblings here are those Factor counts for each row's account and
  // user, so each row's factor is what Factor gives that account and user.
  std::vector<ShareRow> rows;
  for (const auto& [name, users] : accounts) {
    ShareRow row;
    row.account = name;
    row.shares = AccountShares(config, name);
    row.norm_shares = row.shares / total_shares;
    row.usage = Usage(name, now);
    row.norm_usage = total_usage > 0 ? row.usage / total_usage : 0;
    row.factor = ShareFactor(row.norm_usage, row.norm_shares);
    rows.push_back(row);

    const config::AccountSpec* spec = config.FindAccount(name);
    const bool weighs_users = spec != nullptr && !spec->user_shares.empty();
    double user_total_shares = 0;
    double user_total_usage = 0;
    for (const std::string& user : users) {
      user_total_shares += spec != nullptr ? UserShares(*spec, user) : 1;
      user_total_usage += UserUsage(name, user, now);
    }
    for (const std::string& user : users) {
      ShareRow user_row;
      user_row.account = name;
      user_row.user = user;
      user_row.shares = spec != nullptr ? UserShares(*spec, user) : 1;
      user_row.norm_shares = user_row.shares / user_total_shares;
      user_row.usage = UserUsage(name, user, now);
      user_row.norm_usage = user_total_usage > 0 ? user_row.usage / user_total_usage : 0;
      user_row.factor = weighs_users
                            ? row.factor * ShareFactor(user_row.norm_usage, user_row.norm_shares)
                            : row.factor;
      rows.push_back(std::move(user_row));
    }
  }
  return rows;
}

std::vector<UsageRecord> FairShare::Snapshot(Millis now) const {
  std::vector<UsageRecord> records;
  for (const auto& [name, d] : accounts_) {
    const double usage = At(d, now);
    if (usage > 0) records.push_back({name, "", usage, std::max(now, d.as_of)});
  }
  for (const auto& [key, d] : users_) {
    const double usage = At(d, now);
    if (usage > 0) records.push_back({key.first, key.second, usage, std::max(now, d.as_of)});
  }
  return records;
}

void FairShare::Restore(const std::vector<UsageRecord>& records) {
  accounts_.clear();
  users_.clear();
  for (const UsageRecord& record : records) {
    // A stored value that is not a usage (negative, NaN, infinite) is dropped
    // rather than allowed to poison every factor.
    if (!(record.usage > 0) || std::isinf(record.usage)) continue;
    Decayed& d =
        record.user.empty() ? accounts_[record.account] : users_[{record.account, record.user}];
    d = {record.usage, record.as_of};
  }
  // Records with users but no account total (written by hand, or a total
  // that was dropped) get one: the users' sum at the latest of their times.
  for (const auto& [key, d] : users_) {
    if (accounts_.contains(key.first)) continue;
    Millis latest = d.as_of;
    for (auto it = users_.lower_bound({key.first, ""});
         it != users_.end() && it->first.first == key.first; ++it) {
      latest = std::max(latest, it->second.as_of);
    }
    double sum = 0;
    for (auto it = users_.lower_bound({key.first, ""});
         it != users_.end() && it->first.first == key.first; ++it) {
      sum += At(it->second, latest);
    }
    accounts_[key.first] = {sum, latest};
  }
}

}  // namespace cohort::policy
