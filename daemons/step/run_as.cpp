// SPDX-License-Identifier: Apache-2.0
#include "run_as.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace cohort::step {

absl::StatusOr<Account> LookupAccount(std::uint32_t uid, const std::string& node) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  int error = 0;
  while ((error = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (1U << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  if (found == nullptr) {
    // getpwuid_r reports "no such user" as 0 or as one of these, depending on
    // the name service.
    if (error == 0 || error == ENOENT || error == ESRCH || error == EBADF || error == EPERM) {
      return absl::NotFoundError(fmt::format(
          "user {} does not exist on {}; create it or use the same users on every node", uid,
          node));
    }
    return absl::UnavailableError(
        fmt::format("cannot look up user {} on {}: {}", uid, node, std::strerror(error)));
  }
  Account account;
  account.uid = entry.pw_uid;
  account.gid = entry.pw_gid;
  account.name = entry.pw_name;
  account.home = entry.pw_dir;
  account.shell = entry.pw_shell;
  int count = 32;
  account.groups.resize(static_cast<std::size_t>(count));
  while (::getgrouplist(account.name.c_str(), account.gid, account.groups.data(), &count) < 0) {
    // count now holds how many there are.
    if (count <= static_cast<int>(account.groups.size())) count *= 2;
    account.groups.resize(static_cast<std::size_t>(count));
  }
  account.groups.resize(static_cast<std::size_t>(count));
  return account;
}

std::vector<std::string> AccountEnvironment(std::vector<std::string> env,
                                            const Account& account) {
  const std::array<std::pair<std::string_view, std::string_view>, 4> set = {{
      {"HOME", account.home},
      {"USER", account.name},
      {"LOGNAME", account.name},
      {"SHELL", account.shell.empty() ? std::string_view("/bin/sh") : account.shell},
  }};
  std::erase_if(env, [&set](const std::string& entry) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    return std::any_of(set.begin(), set.end(), [name](const auto& var) { return var.first == name; });
  });
  for (const auto& [name, value] : set) env.push_back(fmt::format("{}={}", name, value));
  return env;
}

}  // namespace cohort::step
