// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

/// Who a job's ranks run as when the stepd is root: the job owner's passwd
/// entry and groups.
namespace cohort::step {

/// A user as the node's passwd and group databases know them.
struct Account {
  uid_t uid = 0;
  gid_t gid = 0;               ///< primary group
  std::vector<gid_t> groups;   ///< supplementary groups, the primary one included
  std::string name;
  std::string home;
  std::string shell;
};

/// Looks `uid` up (getpwuid_r, then getgrouplist). NotFound, naming `node`
/// and what to do, for a uid the node does not know; Unavailable when the
/// lookup itself fails. Blocks on the name service: call it in the stepd,
/// never on the agent's loop.
[[nodiscard]] absl::StatusOr<Account> LookupAccount(std::uint32_t uid, const std::string& node);

/// The rank's environment `env` (NAME=value entries) with HOME, USER,
/// LOGNAME and SHELL set from `account`, in place of any it had: a rank that
/// runs as its owner sees the owner's home, not the submitting shell's. An
/// empty shell is /bin/sh, as login(1) has it. Pure.
[[nodiscard]] std::vector<std::string> AccountEnvironment(std::vector<std::string> env,
                                                          const Account& account);

}  // namespace cohort::step
