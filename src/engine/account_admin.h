// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine_types.h"

/// sacctmgr's changes to the account tree, as pure functions over the
/// config's accounts: each change is checked whole (names, keys, the tree)
/// before any of it applies, and says what it did for the audit.
namespace cohort::engine {

/// How many accounts the tree takes, and how many users one account.
inline constexpr std::size_t kMaxAccounts = 10'000;
inline constexpr std::size_t kMaxUsersPerAccount = 10'000;

/// How many pending or running jobs an account or a QOS has: neither is
/// deleted while it has some.
struct InUse {
  std::function<std::size_t(const std::string& account)> by_account;
  std::function<std::size_t(const std::string& qos)> by_qos;
};

/// Applies `update` to `config`'s accounts, default accounts and QOS.
/// Returns the audit entries (time and uid unset); a refusal changes
/// nothing and names the account, QOS or key and the fix.
[[nodiscard]] absl::StatusOr<std::vector<AccountAudit>> ApplyAccountUpdate(
    const AccountUpdate& update, config::ClusterConfig& config, const InUse& in_use);

/// What of `config`'s accounts and QOS a store keeps (AccountingState's
/// accounts, default accounts and QOS; the audit is the caller's).
[[nodiscard]] AccountingState ManagedPart(const config::ClusterConfig& config);

/// Adds what a store kept to `config`'s cohort.conf accounts and QOS. What
/// no longer fits (an account or QOS cohort.conf now defines, a user of an
/// account gone, a parent gone, a QOS name no QOS has) is dropped and said
/// in the returned warnings.
[[nodiscard]] std::vector<std::string> MergeManaged(const AccountingState& kept,
                                                    config::ClusterConfig& config);

}  // namespace cohort::engine
