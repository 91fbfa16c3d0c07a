// SPDX-License-Identifier: Apache-2.0
// The controller's names for callers' uids (daemons/controller/
// authenticator.cpp): looked up in the user database, kept for a minute.
#include <pwd.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "rpc/authenticator.h"

namespace cohort::controller {
namespace {

// A uid no account has on this host, from `from` up.
std::uint32_t Unassigned(std::uint32_t from) {
  for (std::uint32_t uid = from;; ++uid) {
    if (::getpwuid(uid) == nullptr) return uid;
  }
}

TEST(UserNamesTest, AUidIsNamedAsTheUserDatabaseNamesIt) {
  EXPECT_EQ(UserNameOf(0), "root");
  // Asked again, the name kept answers the same.
  EXPECT_EQ(UserNameOf(0), "root");
}

TEST(UserNamesTest, AUidTheDatabaseDoesNotKnowIsItsNumber) {
  const std::uint32_t uid = Unassigned(3900000000U);
  EXPECT_EQ(UserNameOf(uid), std::to_string(uid));
  EXPECT_EQ(UserNameOf(uid), std::to_string(uid));
}

TEST(UserNamesTest, ManyUidsAreAnsweredEachWithItsOwn) {
  // More than the cache holds: it starts again empty, and answers stay right.
  for (std::uint32_t uid = 3000000000U; uid < 3000000000U + 5000; ++uid) {
    if (::getpwuid(uid) != nullptr) continue;
    ASSERT_EQ(UserNameOf(uid), std::to_string(uid));
  }
  EXPECT_EQ(UserNameOf(0), "root");
}

}  // namespace
}  // namespace cohort::controller
