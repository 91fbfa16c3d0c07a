// SPDX-License-Identifier: Apache-2.0
#include "engine/account_admin.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "absl/strings/str_split.h"

#include "cohort/diagnostics.h"
#include "engine/engine_support.h"

namespace cohort::engine {
namespace {

constexpr std::size_t kMaxNames = 1'000;  // names in one change
constexpr std::size_t kMaxName = 64;      // characters of an account or user name
constexpr std::size_t kMaxSettings = 32;  // Key=Value words in one change
constexpr std::size_t kMaxValue = 1'024;  // characters of a value
constexpr int kMaxShares = 1'000'000;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

absl::Status CheckName(std::string_view kind, std::string_view name) {
  const bool ok = !name.empty() && name.size() <= kMaxName &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                  });
  if (!ok) {
    return absl::InvalidArgumentError(fmt::format(
        "{} name \"{}\": use 1-{} letters, digits, '_', '-' or '.'", kind, name, kMaxName));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParseShares(std::string_view value) {
  int shares = 0;
  const auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), shares);
  if (value.empty() || error != std::errc() || ptr != value.data() + value.size() || shares < 1 ||
      shares > kMaxShares) {
    return absl::InvalidArgumentError(
        fmt::format("Fairshare=\"{}\": give a share count from 1 to {}", value, kMaxShares));
  }
  return shares;
}

config::AccountSpec* Find(std::vector<config::AccountSpec>& accounts, std::string_view name) {
  const auto it = std::find_if(accounts.begin(), accounts.end(),
                               [&](const config::AccountSpec& a) { return a.name == name; });
  return it == accounts.end() ? nullptr : &*it;
}

absl::Status NoAccount(std::string_view name) {
  return absl::NotFoundError(fmt::format("no account {}; sacctmgr show account lists them", name));
}

// Where an account comes from, for refusals: cohort.conf's line, or sacctmgr.
absl::Status FromConfig(const config::AccountSpec& spec, std::string_view what) {
  return absl::FailedPreconditionError(fmt::format(
      "account {} is defined in cohort.conf{}; {} it there and run scontrol reconfigure (sacctmgr "
      "changes only the accounts it made)",
      spec.name,
      spec.defined_at.line > 0 ? fmt::format(" (line {})", spec.defined_at.line) : std::string(),
      what));
}

absl::Status SetAccountKey(config::AccountSpec& spec, const std::string& key,
                           const std::string& value) {
  if (EqualsIgnoreCase(key, "Parent")) {
    spec.parent = value == "root" ? std::string() : value;
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "Fairshare") || EqualsIgnoreCase(key, "Shares")) {
    absl::StatusOr<int> shares = ParseShares(value);
    if (!shares.ok()) return shares.status();
    spec.shares = *shares;
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "Description")) {
    spec.description = value;
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "Organization")) {
    spec.organization = value;
    return absl::OkStatus();
  }
  if (config::IsLimitKey(key)) return config::SetLimit(key, value, spec.limits);
  return absl::InvalidArgumentError(fmt::format(
      "{}: an account takes Parent, Fairshare, Description, Organization, GrpTRES, GrpTRESMins, "
      "GrpJobs, MaxJobs, MaxSubmitJobs, MaxTRESPerJob, QOS (QOS+=, QOS-=) and DefaultQOS",
      key));
}

config::AssocLimits& UserLimitsOf(config::AccountSpec& spec, const std::string& user) {
  for (config::UserAssoc& assoc : spec.user_limits) {
    if (assoc.user == user) return assoc.limits;
  }
  return spec.user_limits.emplace_back(config::UserAssoc{.user = user, .limits = {}}).limits;
}

using Defaults = std::vector<std::pair<std::string, std::string>>;

void SetDefault(Defaults& defaults, const std::string& user, const std::string& account) {
  std::erase_if(defaults, [&](const auto& d) { return d.first == user; });
  defaults.emplace_back(user, account);
}

absl::Status SetUserKey(config::AccountSpec& spec, const std::string& user, const std::string& key,
                        const std::string& value, Defaults& defaults,
                        const std::vector<config::AccountSpec>& accounts) {
  if (EqualsIgnoreCase(key, "Fairshare") || EqualsIgnoreCase(key, "Shares")) {
    absl::StatusOr<int> shares = ParseShares(value);
    if (!shares.ok()) return shares.status();
    std::erase_if(spec.user_shares, [&](const auto& s) { return s.first == user; });
    spec.user_shares.emplace_back(user, *shares);
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "DefaultAccount")) {
    const auto it = std::find_if(accounts.begin(), accounts.end(),
                                 [&](const config::AccountSpec& a) { return a.name == value; });
    if (it == accounts.end() || (!Lists(it->users, user) && it->name != spec.name)) {
      return absl::InvalidArgumentError(fmt::format(
          "DefaultAccount={}: user {} is not in that account; add it there first", value, user));
    }
    SetDefault(defaults, user, value);
    return absl::OkStatus();
  }
  if (config::IsLimitKey(key)) {
    config::AssocLimits limits = UserLimitsOf(spec, user);
    if (absl::Status s = config::SetLimit(key, value, limits); !s.ok()) return s;
    UserLimitsOf(spec, user) = limits;
    std::erase_if(spec.user_limits, [](const config::UserAssoc& a) { return a.limits.Empty(); });
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(fmt::format(
      "{}: a user takes Fairshare, DefaultAccount, GrpTRES, GrpTRESMins, GrpJobs, MaxJobs, "
      "MaxSubmitJobs, MaxTRESPerJob, QOS (QOS+=, QOS-=) and DefaultQOS (and Account= to say "
      "which of its accounts)",
      key));
}

std::string Info(const AccountUpdate& update) {
  std::vector<std::string> words;
  for (const auto& [key, value] : update.set) words.push_back(fmt::format("{}={}", key, value));
  return fmt::format("{}", fmt::join(words, " "));
}

std::string Capital(std::string_view word) {
  std::string out = Lower(word);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

void RemoveUser(config::AccountSpec& spec, const std::string& user, Defaults& defaults) {
  std::erase(spec.users, user);
  std::erase(spec.managed_users, user);
  std::erase_if(spec.user_shares, [&](const auto& s) { return s.first == user; });
  std::erase_if(spec.user_limits, [&](const config::UserAssoc& a) { return a.user == user; });
  std::erase_if(defaults, [&](const auto& d) { return d.first == user && d.second == spec.name; });
}

absl::Status UpdateAccounts(const AccountUpdate& update, const std::string& verb,
                            std::vector<config::AccountSpec>& accounts, Defaults& defaults,
                            const InUse& in_use, std::vector<AccountAudit>& audit) {
  for (const std::string& name : update.names) {
    if (absl::Status s = CheckName("account", name); !s.ok()) return s;
    config::AccountSpec* spec = Find(accounts, name);
    if (verb == "add") {
      if (name == "root") return CheckName("account", "");
      if (spec != nullptr) {
        return absl::AlreadyExistsError(fmt::format(
            "account {} exists; change it with sacctmgr modify account {} set ...", name, name));
      }
      if (accounts.size() >= kMaxAccounts) {
        return absl::ResourceExhaustedError(fmt::format(
            "the tree holds {} accounts, the most it takes; delete some first", kMaxAccounts));
      }
      spec = &accounts.emplace_back();
      spec->name = name;
      spec->managed = true;
    } else if (spec == nullptr) {
      return NoAccount(name);
    } else if (!spec->managed) {
      return FromConfig(*spec, verb == "delete" ? "delete" : "change");
    }
    if (verb == "delete") {
      std::vector<std::string> below;
      for (const config::AccountSpec& other : accounts) {
        if (other.parent == name) below.push_back(other.name);
      }
      if (!below.empty()) {
        return absl::FailedPreconditionError(
            fmt::format("account {} has the accounts {} under it; delete or move them (modify "
                        "account ... set Parent=) first",
                        name, fmt::join(below, ",")));
      }
      if (const std::size_t n = in_use.by_account(name); n > 0) {
        return absl::FailedPreconditionError(fmt::format(
            "account {} has {} pending or running jobs; let them end or cancel them first", name,
            n));
      }
      std::erase_if(defaults, [&](const auto& d) { return d.second == name; });
      std::erase_if(accounts, [&](const config::AccountSpec& a) { return a.name == name; });
    } else {
      for (const auto& [key, value] : update.set) {
        if (absl::Status s = SetAccountKey(*spec, key, value); !s.ok()) return s;
      }
    }
    audit.push_back({.time = {},
                     .uid = 0,
                     .action = Capital(verb) + " Account",
                     .where = name,
                     .info = Info(update)});
  }
  return absl::OkStatus();
}

absl::Status UpdateUsers(const AccountUpdate& update, const std::string& verb,
                         std::vector<config::AccountSpec>& accounts, Defaults& defaults,
                         std::vector<AccountAudit>& audit) {
  if (verb == "add" && update.accounts.empty()) {
    return absl::InvalidArgumentError(
        "name the accounts to add the users to: sacctmgr add user NAME Account=A[,B]");
  }
  for (const std::string& account : update.accounts) {
    if (absl::Status s = CheckName("account", account); !s.ok()) return s;
  }
  for (const std::string& user : update.names) {
    if (absl::Status s = CheckName("user", user); !s.ok()) return s;
    std::vector<config::AccountSpec*> targets;
    if (!update.accounts.empty()) {
      for (const std::string& account : update.accounts) {
        config::AccountSpec* spec = Find(accounts, account);
        if (spec == nullptr) return NoAccount(account);
        targets.push_back(spec);
      }
    } else {
      for (config::AccountSpec& spec : accounts) {
        if (Lists(spec.managed_users, user)) targets.push_back(&spec);
      }
      if (targets.empty()) {
        return absl::NotFoundError(fmt::format(
            "user {} is in no account sacctmgr made it a member of; sacctmgr show assoc lists "
            "users",
            user));
      }
    }
    for (config::AccountSpec* spec : targets) {
      if (verb == "add") {
        if (Lists(spec->users, user)) {
          return absl::AlreadyExistsError(
              fmt::format("user {} is already in account {}", user, spec->name));
        }
        if (spec->users.size() >= kMaxUsersPerAccount) {
          return absl::ResourceExhaustedError(fmt::format(
              "account {} has {} users, the most one takes", spec->name, kMaxUsersPerAccount));
        }
        spec->users.push_back(user);
        spec->managed_users.push_back(user);
      } else if (!Lists(spec->managed_users, user)) {
        if (Lists(spec->users, user)) {
          return absl::FailedPreconditionError(fmt::format(
              "user {} is listed in account {}'s Users= in cohort.conf; change it there and run "
              "scontrol reconfigure",
              user, spec->name));
        }
        return absl::NotFoundError(fmt::format("user {} is not in account {}", user, spec->name));
      }
      if (verb == "delete") {
        RemoveUser(*spec, user, defaults);
      } else {
        for (const auto& [key, value] : update.set) {
          if (absl::Status s = SetUserKey(*spec, user, key, value, defaults, accounts); !s.ok()) {
            return s;
          }
        }
        const bool has_default = std::any_of(defaults.begin(), defaults.end(),
                                             [&](const auto& d) { return d.first == user; });
        if (verb == "add" && !has_default) SetDefault(defaults, user, spec->name);
      }
      audit.push_back({.time = {},
                       .uid = 0,
                       .action = Capital(verb) + " User",
                       .where = fmt::format("{} in {}", user, spec->name),
                       .info = Info(update)});
    }
  }
  return absl::OkStatus();
}

constexpr std::size_t kMaxQos = 1'000;  // QOS the cluster takes

config::QosSpec* FindQos(std::vector<config::QosSpec>& all, std::string_view name) {
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const config::QosSpec& q) { return q.name == name; });
  return it == all.end() ? nullptr : &*it;
}

// sacctmgr's names for QOS keys, as cohort.conf's QOSName lines spell them.
std::string_view QosConfKey(std::string_view key) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kAliases{{
      {"MaxJobsPU", "MaxJobsPerUser"},
      {"MaxSubmitJobsPU", "MaxSubmitJobsPerUser"},
      {"MaxSubmitPU", "MaxSubmitJobsPerUser"},
      {"MaxSubmitJobs", "MaxSubmitJobsPerUser"},
      {"MaxTRESPJ", "MaxTRESPerJob"},
      {"GrpJobsLimit", "GrpJobs"},
  }};
  for (const auto& [alias, name] : kAliases) {
    if (EqualsIgnoreCase(key, alias)) return name;
  }
  return key;
}

// MaxTRESPerUser= and MaxTRESPerAccount=: a QOS limits only GPUs per user
// and per account.
absl::Status SetQosGpus(const std::string& key, const std::string& value, std::optional<int>& out) {
  config::AssocLimits scratch;
  const absl::Status parsed = config::SetLimit("GrpTRES", value, scratch);
  const config::TresCounts& tres = scratch.grp_tres;
  if (!parsed.ok() || tres.cpus || tres.nodes || (tres.gpus && *tres.gpus > 1'000'000)) {
    return absl::InvalidArgumentError(
        fmt::format("{}=\"{}\": a QOS limits GPUs per user and per account; write {}=gres/gpu=8 "
                    "(gres/gpu=-1 clears it)",
                    key, value, key));
  }
  out.reset();
  if (tres.gpus) out = static_cast<int>(*tres.gpus);
  return absl::OkStatus();
}

absl::Status SetQosSetting(config::QosSpec& qos, const std::string& key, const std::string& value) {
  if (EqualsIgnoreCase(key, "MaxTRESPerUser") || EqualsIgnoreCase(key, "MaxTRESPU")) {
    return SetQosGpus(key, value, qos.max_gpus_per_user);
  }
  if (EqualsIgnoreCase(key, "MaxTRESPerAccount") || EqualsIgnoreCase(key, "MaxTRESPA")) {
    return SetQosGpus(key, value, qos.max_gpus_per_account);
  }
  const bool clear = value == "-1" || value == "''" || value.empty();
  if (EqualsIgnoreCase(key, "Preempt") || EqualsIgnoreCase(key, "Preempt+") ||
      EqualsIgnoreCase(key, "Preempt-")) {
    std::vector<std::string> names;
    if (!clear) {
      names = absl::StrSplit(value, ',');
      for (const std::string& name : names) {
        if (absl::Status s = CheckName("QOS", name); !s.ok()) return s;
      }
    }
    if (EqualsIgnoreCase(key, "Preempt")) {
      qos.preempt = std::move(names);
    } else if (EqualsIgnoreCase(key, "Preempt+")) {
      for (std::string& name : names) {
        if (!Lists(qos.preempt, name)) qos.preempt.push_back(std::move(name));
      }
    } else {
      for (const std::string& name : names) std::erase(qos.preempt, name);
    }
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "Description")) {
    qos.description = value;
    return absl::OkStatus();
  }
  if (EqualsIgnoreCase(key, "AllowAccounts") || EqualsIgnoreCase(key, "AllowUsers")) {
    return config::SetQosKey(key, clear ? "ALL" : value, qos);
  }
  const std::string_view conf_key = QosConfKey(key);
  if (config::IsLimitKey(conf_key)) {
    if (EqualsIgnoreCase(conf_key, "QOS") || EqualsIgnoreCase(conf_key, "QOS+") ||
        EqualsIgnoreCase(conf_key, "QOS-") || EqualsIgnoreCase(conf_key, "DefaultQOS") ||
        EqualsIgnoreCase(conf_key, "MaxJobs")) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: a QOS takes MaxJobsPerUser and MaxSubmitJobsPerUser; QOS= and DefaultQOS= are an "
          "account's or a user's (sacctmgr modify account|user)",
          key));
    }
    return config::SetLimit(conf_key, value, qos.limits);
  }
  if (EqualsIgnoreCase(key, "Flags") || EqualsIgnoreCase(key, "UsageFactor") ||
      EqualsIgnoreCase(key, "UsageThreshold") || EqualsIgnoreCase(key, "MinTRESPerJob")) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: Cohort's QOS do not take it; they take Priority, MaxWall, MaxJobsPerUser, "
        "MaxSubmitJobsPerUser, MaxTRESPerUser, MaxTRESPerAccount, MaxTRESPerJob, GrpTRES, "
        "GrpTRESMins, GrpJobs, Preempt, PreemptMode, GraceTime, Description",
        key));
  }
  return config::SetQosKey(conf_key, clear ? "UNLIMITED" : value, qos);
}

// Where a QOS is named, for a refusal to delete it; empty: nowhere.
std::string QosUsedBy(const config::ClusterConfig& config,
                      const std::vector<config::AccountSpec>& accounts, const std::string& name) {
  if (config.default_qos == name) return "it is the cluster's DefaultQOS (cohort.conf)";
  for (const config::PartitionSpec& p : config.partitions) {
    if (Lists(p.allow_qos, name)) return fmt::format("partition {}'s AllowQos names it", p.name);
  }
  for (const config::QosSpec& q : config.qos) {
    if (Lists(q.preempt, name)) return fmt::format("QOS {} preempts it (Preempt=)", q.name);
  }
  for (const config::AccountSpec& a : accounts) {
    const auto names = [&](const config::AssocLimits& l) {
      return Lists(l.qos, name) || l.default_qos == name;
    };
    if (names(a.limits)) return fmt::format("account {} lists it in QOS= or DefaultQOS=", a.name);
    for (const config::UserAssoc& u : a.user_limits) {
      if (names(u.limits)) {
        return fmt::format("user {} in account {} lists it in QOS= or DefaultQOS=", u.user, a.name);
      }
    }
  }
  return {};
}

absl::Status UpdateQos(const AccountUpdate& update, const std::string& verb,
                       const config::ClusterConfig& config, std::vector<config::QosSpec>& all,
                       const std::vector<config::AccountSpec>& accounts, const InUse& in_use,
                       std::vector<AccountAudit>& audit) {
  for (const std::string& name : update.names) {
    if (absl::Status s = CheckName("QOS", name); !s.ok()) return s;
    config::QosSpec* qos = FindQos(all, name);
    if (verb == "add") {
      if (qos != nullptr) {
        return absl::AlreadyExistsError(fmt::format(
            "QOS {} exists; change it with sacctmgr modify qos {} set ...", name, name));
      }
      if (all.size() >= kMaxQos) {
        return absl::ResourceExhaustedError(
            fmt::format("the cluster has {} QOS, the most it takes; delete some first", kMaxQos));
      }
      qos = &all.emplace_back();
      qos->name = name;
      qos->managed = true;
    } else if (qos == nullptr) {
      return absl::NotFoundError(fmt::format("no QOS {}; sacctmgr show qos lists them", name));
    } else if (!qos->managed && qos->defined_at.line == 0 && name == config.default_qos) {
      return absl::FailedPreconditionError(fmt::format(
          "QOS {} is the cluster's DefaultQOS, which cohort.conf declares without a QOSName line; "
          "add QOSName={} there to {} it and run scontrol reconfigure",
          name, name, verb == "delete" ? "replace" : "change"));
    } else if (!qos->managed) {
      return absl::FailedPreconditionError(fmt::format(
          "QOS {} is defined in cohort.conf (line {}); {} it there and run scontrol reconfigure "
          "(sacctmgr changes only the QOS it made)",
          name, qos->defined_at.line, verb == "delete" ? "delete" : "change"));
    }
    if (verb == "delete") {
      if (std::string used = QosUsedBy(config, accounts, name); !used.empty()) {
        return absl::FailedPreconditionError(
            fmt::format("QOS {} is in use: {}; change that first", name, used));
      }
      if (const std::size_t n = in_use.by_qos(name); n > 0) {
        return absl::FailedPreconditionError(fmt::format(
            "QOS {} has {} pending or running jobs; let them end or cancel them first", name, n));
      }
      std::erase_if(all, [&](const config::QosSpec& q) { return q.name == name; });
    } else {
      for (const auto& [key, value] : update.set) {
        if (absl::Status s = SetQosSetting(*qos, key, value); !s.ok()) return s;
      }
    }
    audit.push_back({.time = {},
                     .uid = 0,
                     .action = Capital(verb) + " QOS",
                     .where = name,
                     .info = Info(update)});
  }
  // Every Preempt= names a QOS other than its own.
  for (const config::QosSpec& qos : all) {
    for (const std::string& victim : qos.preempt) {
      if (victim == qos.name) {
        return absl::InvalidArgumentError(fmt::format(
            "QOS {} lists itself in Preempt=; a QOS cannot preempt its own jobs", qos.name));
      }
      if (FindQos(all, victim) == nullptr) {
        return absl::InvalidArgumentError(fmt::format(
            "QOS {}: Preempt= names no QOS {}; sacctmgr show qos lists them", qos.name, victim));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<AccountAudit>> ApplyAccountUpdate(const AccountUpdate& update,
                                                             config::ClusterConfig& config,
                                                             const InUse& in_use) {
  const std::string verb = Lower(update.verb);
  const std::string entity = Lower(update.entity);
  if (verb != "add" && verb != "modify" && verb != "delete") {
    return absl::InvalidArgumentError(
        fmt::format("\"{}\": sacctmgr changes with add, modify or delete", update.verb));
  }
  if (entity != "account" && entity != "user" && entity != "qos") {
    return absl::InvalidArgumentError(
        fmt::format("\"{}\": sacctmgr {} takes account, user or qos", update.entity, verb));
  }
  if (update.names.empty()) {
    return absl::InvalidArgumentError(fmt::format("name the {}s to {}", entity, verb));
  }
  if (update.names.size() > kMaxNames || update.accounts.size() > kMaxNames ||
      update.set.size() > kMaxSettings) {
    return absl::InvalidArgumentError(fmt::format(
        "one change takes at most {} names and {} settings; split it", kMaxNames, kMaxSettings));
  }
  for (const auto& [key, value] : update.set) {
    if (value.size() > kMaxValue || key.size() > kMaxName) {
      return absl::InvalidArgumentError(fmt::format("{}=: a value takes at most {} characters",
                                                    key.substr(0, kMaxName), kMaxValue));
    }
  }
  if (verb == "delete" && !update.set.empty()) {
    return absl::InvalidArgumentError("delete takes no settings; name what to delete");
  }
  if (verb == "modify" && update.set.empty()) {
    return absl::InvalidArgumentError("modify needs settings: ... set Key=Value");
  }
  std::vector<config::AccountSpec> accounts = config.accounts;
  Defaults defaults = config.default_accounts;
  std::vector<config::QosSpec> qos = config.qos;
  std::vector<AccountAudit> audit;
  absl::Status applied;
  if (entity == "account") {
    applied = UpdateAccounts(update, verb, accounts, defaults, in_use, audit);
  } else if (entity == "user") {
    applied = UpdateUsers(update, verb, accounts, defaults, audit);
  } else {
    applied = UpdateQos(update, verb, config, qos, accounts, in_use, audit);
  }
  if (!applied.ok()) return applied;
  if (absl::Status tree = config::CheckAccountTree(accounts); !tree.ok()) return tree;
  if (absl::Status named = config::CheckAccountQos(accounts, qos); !named.ok()) return named;
  config.accounts = std::move(accounts);
  config.default_accounts = std::move(defaults);
  config.qos = std::move(qos);
  return audit;
}

AccountingState ManagedPart(const config::ClusterConfig& config) {
  AccountingState state;
  for (const config::AccountSpec& spec : config.accounts) {
    if (spec.managed) {
      state.accounts.push_back(spec);
      continue;
    }
    if (spec.managed_users.empty()) continue;
    config::AccountSpec& kept = state.accounts.emplace_back();
    kept.name = spec.name;
    kept.users = spec.managed_users;
    kept.managed_users = spec.managed_users;
    for (const auto& share : spec.user_shares) {
      if (Lists(spec.managed_users, share.first)) kept.user_shares.push_back(share);
    }
    for (const config::UserAssoc& assoc : spec.user_limits) {
      if (Lists(spec.managed_users, assoc.user)) kept.user_limits.push_back(assoc);
    }
  }
  state.default_accounts = config.default_accounts;
  for (const config::QosSpec& qos : config.qos) {
    if (qos.managed) state.qos.push_back(qos);
  }
  return state;
}

std::vector<std::string> MergeManaged(const AccountingState& kept, config::ClusterConfig& config) {
  std::vector<std::string> warnings;
  // The QOS first: the accounts name them.
  for (const config::QosSpec& qos : kept.qos) {
    if (FindQos(config.qos, qos.name) != nullptr) {
      warnings.push_back(fmt::format(
          "QOS {} made by sacctmgr is now defined in cohort.conf; cohort.conf's line wins",
          qos.name));
      continue;
    }
    config.qos.push_back(qos);
  }
  for (config::QosSpec& qos : config.qos) {
    if (!qos.managed) continue;
    std::erase_if(qos.preempt, [&](const std::string& victim) {
      if (victim != qos.name && FindQos(config.qos, victim) != nullptr) return false;
      warnings.push_back(
          fmt::format("QOS {}: Preempt= drops {}, which is no longer a QOS", qos.name, victim));
      return true;
    });
  }
  for (const config::AccountSpec& spec : kept.accounts) {
    config::AccountSpec* here = Find(config.accounts, spec.name);
    if (spec.managed) {
      if (here != nullptr) {
        warnings.push_back(fmt::format(
            "account {} made by sacctmgr is now defined in cohort.conf; cohort.conf's line wins",
            spec.name));
        continue;
      }
      config.accounts.push_back(spec);
      continue;
    }
    if (here == nullptr) {
      warnings.push_back(fmt::format(
          "account {} is no longer in cohort.conf; the users sacctmgr added to it are dropped",
          spec.name));
      continue;
    }
    for (const std::string& user : spec.managed_users) {
      if (Lists(here->users, user)) continue;  // cohort.conf lists it now
      here->users.push_back(user);
      here->managed_users.push_back(user);
    }
    for (const auto& share : spec.user_shares) {
      if (Lists(here->managed_users, share.first)) here->user_shares.push_back(share);
    }
    for (const config::UserAssoc& assoc : spec.user_limits) {
      if (Lists(here->managed_users, assoc.user)) here->user_limits.push_back(assoc);
    }
  }
  // Accounts whose parent is gone go too, and then those under them.
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (auto it = config.accounts.begin(); it != config.accounts.end(); ++it) {
      if (!it->managed || it->parent.empty() || Find(config.accounts, it->parent) != nullptr) {
        continue;
      }
      warnings.push_back(fmt::format(
          "account {} made by sacctmgr is dropped: its parent {} is no longer an account", it->name,
          it->parent));
      config.accounts.erase(it);
      dropped = true;
      break;
    }
  }
  if (absl::Status tree = config::CheckAccountTree(config.accounts); !tree.ok()) {
    warnings.push_back(
        fmt::format("the accounts sacctmgr made are dropped: {}", std::string(tree.message())));
    std::erase_if(config.accounts, [](const config::AccountSpec& a) { return a.managed; });
  }
  for (const auto& [user, account] : kept.default_accounts) {
    if (Find(config.accounts, account) != nullptr)
      config.default_accounts.emplace_back(user, account);
  }
  // QOS= and DefaultQOS= naming a QOS that is gone drop it.
  const auto prune = [&](config::AssocLimits& limits, const std::string& who) {
    std::erase_if(limits.qos, [&](const std::string& name) {
      if (FindQos(config.qos, name) != nullptr) return false;
      warnings.push_back(fmt::format("{}: QOS= drops {}, which is no longer a QOS", who, name));
      return true;
    });
    if (!limits.default_qos.empty() &&
        (FindQos(config.qos, limits.default_qos) == nullptr ||
         (!limits.qos.empty() && !Lists(limits.qos, limits.default_qos)))) {
      warnings.push_back(
          fmt::format("{}: DefaultQOS={} is dropped: no such QOS, or not in its QOS=", who,
                      limits.default_qos));
      limits.default_qos.clear();
    }
  };
  for (config::AccountSpec& spec : config.accounts) {
    if (spec.managed) prune(spec.limits, "account " + spec.name);
    for (config::UserAssoc& user : spec.user_limits) {
      if (spec.managed || Lists(spec.managed_users, user.user)) {
        prune(user.limits, fmt::format("user {} in {}", user.user, spec.name));
      }
    }
  }
  return warnings;
}

}  // namespace cohort::engine
