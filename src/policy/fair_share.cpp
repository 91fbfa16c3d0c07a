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

// Whether no account has a Parent=: every account's usage is its own
// jobs', and Factor takes its one-level path.
bool IsFlat(const config::ClusterConfig& config) {
  return std::none_of(config.accounts.begin(), config.accounts.end(),
                      [](const config::AccountSpec& a) { return !a.parent.empty(); });
}

// The parent of an account: its Parent=, or the root for an account
// without an AccountName line.
const std::string& ParentOf(const config::ClusterConfig& config, const std::string& account) {
  static const std::string kRoot;
  const config::AccountSpec* spec = config.FindAccount(account);
  return spec != nullptr ? spec->parent : kRoot;
}

double Get(const std::map<std::string, double>& map, const std::string& key) {
  const auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

}  // namespace

FairShare::FairShare(std::chrono::seconds half_life, config::UsageResetPeriod period)
    : half_life_(half_life), period_(period) {}

void FairShare::Roll(Millis now) {
  const Millis start = config::PeriodStart(period_, now);
  if (start <= period_start_) return;
  period_start_ = start;
  for (auto& [name, d] : accounts_) d.gpu_seconds = d.cpu_seconds = 0;
  for (auto& [key, d] : users_) d.gpu_seconds = d.cpu_seconds = 0;
  qos_.clear();
}

PeriodUse FairShare::AccountPeriodUse(const std::string& account, Millis now) const {
  const auto it = accounts_.find(account);
  return it == accounts_.end() ? PeriodUse{} : PeriodOf(it->second, now);
}

PeriodUse FairShare::UserPeriodUse(const std::string& account, const std::string& user,
                                   Millis now) const {
  const auto it = users_.find({account, user});
  return it == users_.end() ? PeriodUse{} : PeriodOf(it->second, now);
}

std::map<std::string, double> FairShare::SubtreeUsage(const config::ClusterConfig& config,
                                                      Millis now) const {
  std::map<std::string, double> usage;
  for (const auto& [name, d] : accounts_) {
    const double value = At(d, now);
    usage[name] += value;
    const std::vector<const config::AccountSpec*> chain = config.AccountChain(name);
    for (std::size_t i = 1; i < chain.size(); ++i) usage[chain[i]->name] += value;
  }
  return usage;
}

double FairShare::LevelFactor(const config::ClusterConfig& config,
                              const std::map<std::string, double>& subtree,
                              const std::string& account) const {
  const std::string& parent = ParentOf(config, account);
  double shares = 0;
  double usage = 0;
  bool counted = false;
  for (const config::AccountSpec& spec : config.accounts) {
    if (spec.parent != parent) continue;
    shares += std::max(spec.shares, 1);
    usage += Get(subtree, spec.name);
    counted |= spec.name == account;
  }
  if (parent.empty()) {
    // Accounts without an AccountName line sit under the root, 1 share each.
    for (const auto& [name, value] : subtree) {
      if (config.FindAccount(name) != nullptr) continue;
      shares += 1;
      usage += value;
      counted |= name == account;
    }
  }
  if (!counted) shares += 1;
  const double norm_usage = usage > 0 ? Get(subtree, account) / usage : 0;
  return ShareFactor(norm_usage, AccountShares(config, account) / shares);
}

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

void FairShare::Add(Decayed& d, const Use& use, Millis now) const {
  const Millis at = std::max(now, d.as_of);
  d.value = At(d, at) + use.resource_seconds;
  d.as_of = at;
  d.gpu_seconds += use.gpu_seconds;
  d.cpu_seconds += use.cpu_seconds;
}

namespace {

// Whether a charge adds nothing, or is no amount (negative, NaN, infinite).
bool NothingToCharge(const Use& use) {
  // `!(x >= 0)` also catches NaN.
  const auto bad = [](double x) { return !(x >= 0) || std::isinf(x); };
  return bad(use.resource_seconds) || bad(use.gpu_seconds) || bad(use.cpu_seconds) ||
         !(use.resource_seconds > 0 || use.gpu_seconds > 0 || use.cpu_seconds > 0);
}

}  // namespace

void FairShare::ChargeQos(const std::string& qos, const Use& use, Millis now) {
  if (qos.empty() || NothingToCharge(use)) return;
  Roll(now);
  PeriodUse& to = qos_[qos];
  to.gpu_seconds += use.gpu_seconds;
  to.cpu_seconds += use.cpu_seconds;
}

PeriodUse FairShare::QosPeriodUse(const std::string& qos, Millis now) const {
  const auto it = qos_.find(qos);
  return it == qos_.end() || !InPeriod(now) ? PeriodUse{} : it->second;
}

void FairShare::Charge(const std::string& account, const std::string& user, const Use& use,
                       Millis now) {
  if (NothingToCharge(use)) return;
  Roll(now);
  Add(accounts_[account], use, now);
  // An empty user would read back as the account's total in a Snapshot.
  if (!user.empty()) Add(users_[{account, user}], use, now);
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
  const double account_factor =
      IsFlat(config) ? FlatFactor(config, account, now) : TreeFactor(config, account, now);
  const config::AccountSpec* spec = config.FindAccount(account);
  if (spec == nullptr || spec->user_shares.empty()) return account_factor;
  return account_factor * UserFactor(*spec, account, user, now);
}

double FairShare::TreeFactor(const config::ClusterConfig& config, const std::string& account,
                             Millis now) const {
  const std::map<std::string, double> subtree = SubtreeUsage(config, now);
  const std::vector<const config::AccountSpec*> chain = config.AccountChain(account);
  if (chain.empty()) return LevelFactor(config, subtree, account);
  double factor = 1;
  for (const config::AccountSpec* level : chain)
    factor *= LevelFactor(config, subtree, level->name);
  return factor;
}

double FairShare::FlatFactor(const config::ClusterConfig& config, const std::string& account,
                             Millis now) const {
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
  return ShareFactor(norm_usage, norm_shares);
}

double FairShare::UserFactor(const config::AccountSpec& spec, const std::string& account,
                             const std::string& user, Millis now) const {
  // As for accounts, inside the account: listed users, users with usage,
  // this one.
  double user_total_shares = 0;
  std::size_t listed_with_usage = 0;
  bool user_counted = false;
  for (const auto& [name, shares] : spec.user_shares) {
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
  const double user_norm_shares = UserShares(spec, user) / user_total_shares;
  const double user_norm_usage =
      user_total_usage > 0 ? UserUsage(account, user, now) / user_total_usage : 0;
  return ShareFactor(user_norm_usage, user_norm_shares);
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
  std::map<std::string, std::vector<std::string>> children;  // by parent, in name order
  for (const auto& [name, users] : accounts) children[ParentOf(config, name)].push_back(name);
  const std::map<std::string, double> subtree = SubtreeUsage(config, now);

  // Depth first from the root, each account's users and then its
  // sub-accounts after its own row. The siblings here are those Factor
  // counts for each row's account and user, so each row's factor is what
  // Factor gives that account and user.
  std::vector<ShareRow> rows;
  std::set<std::string> seen;  // a loop (refused when made) is not followed
  const auto add_level = [&](const auto& self, const std::string& parent, double factor,
                             int depth) -> void {
    const std::vector<std::string>& names = children[parent];
    double total_shares = 0;
    double total_usage = 0;
    for (const std::string& name : names) {
      total_shares += AccountShares(config, name);
      total_usage += Get(subtree, name);
    }
    for (const std::string& name : names) {
      if (!seen.insert(name).second) continue;
      ShareRow row;
      row.account = name;
      row.parent = parent;
      row.depth = depth;
      row.shares = AccountShares(config, name);
      row.norm_shares = row.shares / total_shares;
      row.usage = Get(subtree, name);
      row.norm_usage = total_usage > 0 ? row.usage / total_usage : 0;
      row.factor = factor * ShareFactor(row.norm_usage, row.norm_shares);
      rows.push_back(row);
      AddUserRows(config, row, accounts[name], now, rows);
      self(self, name, row.factor, depth + 1);
    }
  };
  add_level(add_level, "", 1.0, 0);
  return rows;
}

void FairShare::AddUserRows(const config::ClusterConfig& config, const ShareRow& account_row,
                            const std::set<std::string>& users, Millis now,
                            std::vector<ShareRow>& rows) const {
  const config::AccountSpec* spec = config.FindAccount(account_row.account);
  const bool weighs_users = spec != nullptr && !spec->user_shares.empty();
  double user_total_shares = 0;
  double user_total_usage = 0;
  for (const std::string& user : users) {
    user_total_shares += spec != nullptr ? UserShares(*spec, user) : 1;
    user_total_usage += UserUsage(account_row.account, user, now);
  }
  for (const std::string& user : users) {
    ShareRow row;
    row.account = account_row.account;
    row.user = user;
    row.parent = account_row.account;
    row.depth = account_row.depth + 1;
    row.shares = spec != nullptr ? UserShares(*spec, user) : 1;
    row.norm_shares = row.shares / user_total_shares;
    row.usage = UserUsage(account_row.account, user, now);
    row.norm_usage = user_total_usage > 0 ? row.usage / user_total_usage : 0;
    row.factor = weighs_users ? account_row.factor * ShareFactor(row.norm_usage, row.norm_shares)
                              : account_row.factor;
    rows.push_back(std::move(row));
  }
}

std::vector<UsageRecord> FairShare::Snapshot(Millis now) const {
  std::vector<UsageRecord> records;
  const auto add = [&](const std::string& account, const std::string& user, const Decayed& d) {
    const double usage = At(d, now);
    const PeriodUse period = PeriodOf(d, now);
    if (usage > 0 || period.gpu_seconds > 0 || period.cpu_seconds > 0) {
      records.push_back({account,
                         user,
                         usage,
                         std::max(now, d.as_of),
                         period.gpu_seconds,
                         period.cpu_seconds,
                         period_start_,
                         {}});
    }
  };
  for (const auto& [name, d] : accounts_) add(name, "", d);
  for (const auto& [key, d] : users_) add(key.first, key.second, d);
  if (InPeriod(now)) {
    for (const auto& [name, use] : qos_) {
      if (use.gpu_seconds <= 0 && use.cpu_seconds <= 0) continue;
      records.push_back({.account = {},
                         .user = {},
                         .usage = 0,
                         .as_of = now,
                         .gpu_seconds = use.gpu_seconds,
                         .cpu_seconds = use.cpu_seconds,
                         .period_start = period_start_,
                         .qos = name});
    }
  }
  return records;
}

void FairShare::Restore(const std::vector<UsageRecord>& records) {
  accounts_.clear();
  users_.clear();
  qos_.clear();
  period_start_ = Millis(0);
  for (const UsageRecord& record : records) {
    period_start_ = std::max(period_start_, record.period_start);
  }
  const auto usable = [](double x) { return x > 0 && !std::isinf(x); };
  for (const UsageRecord& record : records) {
    // A stored value that is not a usage (negative, NaN, infinite) is dropped
    // rather than allowed to poison every factor.
    const bool decayed = usable(record.usage);
    // Budgets' counts of an earlier period than the latest are spent.
    const bool this_period = record.period_start == period_start_;
    const double gpu = this_period && usable(record.gpu_seconds) ? record.gpu_seconds : 0;
    const double cpu = this_period && usable(record.cpu_seconds) ? record.cpu_seconds : 0;
    if (!decayed && gpu == 0 && cpu == 0) continue;
    if (!record.qos.empty()) {
      if (gpu > 0 || cpu > 0) qos_[record.qos] = {.gpu_seconds = gpu, .cpu_seconds = cpu};
      continue;
    }
    Decayed& d =
        record.user.empty() ? accounts_[record.account] : users_[{record.account, record.user}];
    d = {decayed ? record.usage : 0, record.as_of, gpu, cpu};
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
    Decayed total{.value = 0, .as_of = latest, .gpu_seconds = 0, .cpu_seconds = 0};
    for (auto it = users_.lower_bound({key.first, ""});
         it != users_.end() && it->first.first == key.first; ++it) {
      total.value += At(it->second, latest);
      total.gpu_seconds += it->second.gpu_seconds;
      total.cpu_seconds += it->second.cpu_seconds;
    }
    accounts_[key.first] = total;
  }
}

}  // namespace cohort::policy
