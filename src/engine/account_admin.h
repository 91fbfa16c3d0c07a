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

/// Applies `update` to `config`'s accounts and default accounts. `queued`
/// says how many pending or running jobs an account has (an account with
/// some is not deleted). Returns the audit entries (time and uid unset);
/// a refusal changes nothing and names the account or key and the fix.
[[nodiscard]] absl::StatusOr<std::vector<AccountAudit>> ApplyAccountUpdate(
    const AccountUpdate& update, config::ClusterConfig& config,
    const std::function<std::size_t(const std::string& account)>& queued);

/// What of `config`'s accounts a store keeps (AccountingState's accounts
/// and default accounts; the audit is the caller's).
[[nodiscard]] AccountingState ManagedPart(const config::ClusterConfig& config);

/// Adds what a store kept to `config`'s cohort.conf accounts. What no longer
/// fits (an account cohort.conf now defines, a user of an account gone, a
/// parent gone) is dropped and said in the returned warnings.
[[nodiscard]] std::vector<std::string> MergeManaged(const AccountingState& kept,
                                                    config::ClusterConfig& config);

}  // namespace cohort::engine
