// SPDX-License-Identifier: Apache-2.0
#include "run_as.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace cohort::step {
namespace {

Account Alice() {
  Account account;
  account.uid = 61001;
  account.gid = 61001;
  account.name = "alice";
  account.home = "/home/alice";
  account.shell = "/bin/bash";
  return account;
}

TEST(RunAsTest, TheOwnersPasswdEntryReplacesTheSubmittersHomeAndNames) {
  const std::vector<std::string> env =
      AccountEnvironment({"PATH=/usr/bin", "HOME=/root", "USER=root", "LOGNAME=root",
                          "SHELL=/bin/zsh", "HOMEX=1", "RANK=0"},
                         Alice());
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/bin", "HOMEX=1", "RANK=0", "HOME=/home/alice",
                                           "USER=alice", "LOGNAME=alice", "SHELL=/bin/bash"}));
}

TEST(RunAsTest, AnEmptyShellIsBinSh) {
  Account account = Alice();
  account.shell.clear();
  const std::vector<std::string> env = AccountEnvironment({}, account);
  EXPECT_EQ(env.back(), "SHELL=/bin/sh");
}

TEST(RunAsTest, LooksUpRootAndRefusesAnUnknownUidNamingTheNode) {
  absl::StatusOr<Account> root = LookupAccount(0, "node05");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "root");
  EXPECT_EQ(root->gid, 0U);
  // 4294967294 is (uid_t)-2: no system gives it a passwd entry.
  absl::StatusOr<Account> nobody_here = LookupAccount(4294967294U, "node05");
  ASSERT_FALSE(nobody_here.ok());
  EXPECT_EQ(nobody_here.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(nobody_here.status().message(),
            "user 4294967294 does not exist on node05; create it or use the same users on every "
            "node");
}

}  // namespace
}  // namespace cohort::step
