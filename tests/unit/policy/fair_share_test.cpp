// SPDX-License-Identifier: Apache-2.0
#include "cohort/policy/fair_share.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cohort/config/cluster_config.h"

namespace cohort::policy {
namespace {

using std::chrono::hours;

constexpr hours kHalfLife{1};
constexpr Millis kHour = std::chrono::duration_cast<Millis>(hours(1));

config::AccountSpec Account(std::string name, int shares,
                            std::vector<std::pair<std::string, int>> users = {}) {
  config::AccountSpec spec;
  spec.name = std::move(name);
  spec.shares = shares;
  spec.user_shares = std::move(users);
  return spec;
}

config::ClusterConfig Config(std::vector<config::AccountSpec> accounts) {
  config::ClusterConfig config;
  config.accounts = std::move(accounts);
  return config;
}

config::AccountSpec Under(std::string name, std::string parent) {
  config::AccountSpec spec = Account(std::move(name), 1);
  spec.parent = std::move(parent);
  return spec;
}

TEST(FairShareTest, InATreeEachLevelWeighsAgainstItsSiblings) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config =
      Config({Account("a", 1), Under("a1", "a"), Under("a2", "a"), Account("b", 1)});
  fs.Charge("a1", "alice", 100, Millis(0));
  fs.Charge("b", "bob", 100, Millis(0));
  // a (with a1's usage) used half with half the shares: 2^(−0.5/0.5); a2,
  // idle inside a, keeps that; a1 used all of a's with half of a's shares.
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a2", "carol", Millis(0)), 0.5);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a1", "alice", Millis(0)), 0.5 * 0.25);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "b", "bob", Millis(0)), 0.5);

  const std::vector<ShareRow> rows = fs.Rows(config, Millis(0));
  std::vector<std::string> order;
  for (const ShareRow& row : rows) {
    order.push_back(std::string(static_cast<std::size_t>(row.depth), ' ') + row.account + "/" +
                    row.user);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a/", " a1/", "  a1/alice", " a2/", "b/", " b/bob"}));
  EXPECT_DOUBLE_EQ(rows[0].usage, 100) << "a's line counts a1's usage";
  EXPECT_DOUBLE_EQ(rows[1].factor, fs.Factor(config, "a1", "alice", Millis(0)));
}

TEST(FairShareTest, BudgetsCountUndecayedUseAndStartAgainEachPeriod) {
  FairShare fs(kHalfLife, config::UsageResetPeriod::kDaily);
  const Millis day = std::chrono::duration_cast<Millis>(std::chrono::days(1));
  const Millis t = day * 100 + kHour;
  fs.Charge("a", "alice", Use{.resource_seconds = 10, .gpu_seconds = 10, .cpu_seconds = 40}, t);
  fs.Charge("a", "alice", Use{.resource_seconds = 5, .gpu_seconds = 5, .cpu_seconds = 0},
            t + kHour * 5);
  EXPECT_DOUBLE_EQ(fs.AccountPeriodUse("a", t + kHour * 5).gpu_seconds, 15) << "no decay";
  EXPECT_DOUBLE_EQ(fs.UserPeriodUse("a", "alice", t + kHour * 5).cpu_seconds, 40);
  EXPECT_LT(fs.Usage("a", t + kHour * 5), 15) << "fair share decays";
  EXPECT_DOUBLE_EQ(fs.AccountPeriodUse("a", t + day).gpu_seconds, 0) << "the next day";
  // A snapshot keeps the period; restored, the counts are there again.
  FairShare restored(kHalfLife, config::UsageResetPeriod::kDaily);
  restored.Restore(fs.Snapshot(t + kHour * 6));
  EXPECT_DOUBLE_EQ(restored.AccountPeriodUse("a", t + kHour * 6).gpu_seconds, 15);
}

TEST(FairShareTest, NothingUsedGivesEveryoneOne) {
  const FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("a", 1), Account("b", 3)});
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "alice", Millis(0)), 1.0);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "unlisted", "bob", Millis(0)), 1.0);
}

TEST(FairShareTest, EqualSharesAndEqualUsageGiveOneHalfEach) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("a", 1), Account("b", 1)});
  fs.Charge("a", "alice", 3600, Millis(0));
  fs.Charge("b", "bob", 3600, Millis(0));
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "alice", kHour), 0.5);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "b", "bob", kHour), 0.5);
}

TEST(FairShareTest, AnAccountOverItsShareFallsAndAnIdleOneIsOne) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("a", 1), Account("b", 1)});
  fs.Charge("a", "alice", 1000, Millis(0));
  // a used everything with half the shares: 2^(−1/0.5).
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "alice", Millis(0)), 0.25);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "b", "bob", Millis(0)), 1.0);
}

TEST(FairShareTest, SharesWeighTheFactor) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("big", 3), Account("small", 1)});
  fs.Charge("big", "u", 300, Millis(0));
  fs.Charge("small", "v", 100, Millis(0));
  // Each used exactly its share (75 % and 25 %): the factor is 0.5 for both.
  EXPECT_DOUBLE_EQ(fs.Factor(config, "big", "u", Millis(0)), 0.5);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "small", "v", Millis(0)), 0.5);
}

TEST(FairShareTest, DecayHalvesUsageEachHalfLife) {
  FairShare fs(kHalfLife);
  fs.Charge("a", "alice", 100, Millis(0));
  EXPECT_DOUBLE_EQ(fs.Usage("a", Millis(0)), 100);
  EXPECT_DOUBLE_EQ(fs.Usage("a", kHour), 50);
  EXPECT_DOUBLE_EQ(fs.Usage("a", 2 * kHour), 25);
  EXPECT_DOUBLE_EQ(fs.UserUsage("a", "alice", 2 * kHour), 25);
  // A charge adds to what has decayed so far.
  fs.Charge("a", "alice", 10, kHour);
  EXPECT_DOUBLE_EQ(fs.Usage("a", kHour), 60);
  EXPECT_DOUBLE_EQ(fs.Usage("a", 2 * kHour), 30);
}

TEST(FairShareTest, AnUnlimitedHalfLifeNeverDecays) {
  FairShare fs(kUnlimited);
  fs.Charge("a", "alice", 100, Millis(0));
  EXPECT_DOUBLE_EQ(fs.Usage("a", 1000 * kHour), 100);
}

TEST(FairShareTest, LongIdleUsageBecomesExactlyZero) {
  FairShare fs(kHalfLife);
  fs.Charge("a", "alice", 1e9, Millis(0));
  // 2^(−2000) is far below any double; no denormal may linger.
  EXPECT_EQ(fs.Usage("a", 2000 * kHour), 0.0);
  EXPECT_TRUE(fs.Snapshot(2000 * kHour).empty());
  const config::ClusterConfig config = Config({Account("a", 1), Account("b", 1)});
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "alice", 2000 * kHour), 1.0);
}

TEST(FairShareTest, BadChargesAreIgnored) {
  FairShare fs(kHalfLife);
  fs.Charge("a", "alice", 0, Millis(0));
  fs.Charge("a", "alice", -5, Millis(0));
  fs.Charge("a", "alice", std::numeric_limits<double>::quiet_NaN(), Millis(0));
  fs.Charge("a", "alice", std::numeric_limits<double>::infinity(), Millis(0));
  EXPECT_EQ(fs.Usage("a", Millis(0)), 0.0);
  EXPECT_TRUE(fs.Snapshot(Millis(0)).empty());
}

TEST(FairShareTest, AChargeBackInTimeCountsAtTheLastChargesTime) {
  FairShare fs(kHalfLife);
  fs.Charge("a", "alice", 100, kHour);
  fs.Charge("a", "alice", 100, Millis(0));  // earlier than the last charge
  EXPECT_DOUBLE_EQ(fs.Usage("a", kHour), 200);
  EXPECT_DOUBLE_EQ(fs.Usage("a", 2 * kHour), 100);
}

TEST(FairShareTest, AHeavierUserGetsALowerFactorInsideTheAccount) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config =
      Config({Account("ml", 1, {{"alice", 1}, {"bob", 1}}), Account("other", 1)});
  fs.Charge("ml", "alice", 300, Millis(0));
  fs.Charge("ml", "bob", 100, Millis(0));
  const double account = 0.25;  // ml used everything with half the shares
  EXPECT_DOUBLE_EQ(fs.Factor(config, "ml", "alice", Millis(0)), account * std::exp2(-0.75 / 0.5));
  EXPECT_DOUBLE_EQ(fs.Factor(config, "ml", "bob", Millis(0)), account * std::exp2(-0.25 / 0.5));
  EXPECT_LT(fs.Factor(config, "ml", "alice", Millis(0)), fs.Factor(config, "ml", "bob", Millis(0)));
  // A user of the account who used nothing still gets no more than the account.
  EXPECT_DOUBLE_EQ(fs.Factor(config, "ml", "carol", Millis(0)), account);
}

TEST(FairShareTest, UserSharesWeighUsersAndAnUnlistedUserHasOne) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("ml", 1, {{"alice", 3}})});
  fs.Charge("ml", "alice", 300, Millis(0));
  fs.Charge("ml", "bob", 100, Millis(0));
  // alice 3 shares, bob 1 (unlisted): each used exactly their share.
  const double account = std::exp2(-1.0);  // the only account, used everything
  EXPECT_DOUBLE_EQ(fs.Factor(config, "ml", "alice", Millis(0)), account * 0.5);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "ml", "bob", Millis(0)), account * 0.5);
}

TEST(FairShareTest, WithoutUserSharesEveryUserGetsTheAccountFactor) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("a", 1), Account("b", 1)});
  fs.Charge("a", "alice", 900, Millis(0));
  fs.Charge("a", "bob", 100, Millis(0));
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "alice", Millis(0)), 0.25);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "bob", Millis(0)), 0.25);
}

TEST(FairShareTest, AnUnlistedAccountHasOneShareOnceItAsksOrUses) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config = Config({Account("a", 3)});
  fs.Charge("x", "u", 100, Millis(0));
  // x: 1 of 4 shares, all the usage: 2^(−1/0.25).
  EXPECT_DOUBLE_EQ(fs.Factor(config, "x", "u", Millis(0)), 0.0625);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "a", "u", Millis(0)), 1.0);
  EXPECT_DOUBLE_EQ(fs.Factor(config, "y", "u", Millis(0)), 1.0);
}

TEST(FairShareTest, RowsListAccountsInNameOrderEachFollowedByItsUsers) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config =
      Config({Account("vision", 2, {{"alice", 1}}), Account("idle", 1)});
  fs.Charge("vision", "bob", 100, Millis(0));
  fs.Charge("adhoc", "carol", 100, Millis(0));
  const std::vector<ShareRow> rows = fs.Rows(config, Millis(0));
  std::vector<std::pair<std::string, std::string>> names;
  for (const ShareRow& row : rows) names.emplace_back(row.account, row.user);
  EXPECT_EQ(names, (std::vector<std::pair<std::string, std::string>>{{"adhoc", ""},
                                                                     {"adhoc", "carol"},
                                                                     {"idle", ""},
                                                                     {"vision", ""},
                                                                     {"vision", "alice"},
                                                                     {"vision", "bob"}}));
  const ShareRow& adhoc = rows[0];
  EXPECT_EQ(adhoc.shares, 1);
  EXPECT_DOUBLE_EQ(adhoc.norm_shares, 0.25);
  EXPECT_DOUBLE_EQ(adhoc.usage, 100);
  EXPECT_DOUBLE_EQ(adhoc.norm_usage, 0.5);
  EXPECT_DOUBLE_EQ(adhoc.factor, fs.Factor(config, "adhoc", "carol", Millis(0)));
  EXPECT_DOUBLE_EQ(adhoc.factor, std::exp2(-0.5 / 0.25));
  const ShareRow& idle = rows[2];
  EXPECT_DOUBLE_EQ(idle.usage, 0);
  EXPECT_DOUBLE_EQ(idle.factor, 1.0);
  const ShareRow& vision = rows[3];
  EXPECT_EQ(vision.shares, 2);
  EXPECT_DOUBLE_EQ(vision.norm_shares, 0.5);
  const ShareRow& alice = rows[4];
  EXPECT_DOUBLE_EQ(alice.norm_shares, 0.5);
  EXPECT_DOUBLE_EQ(alice.usage, 0);
  EXPECT_DOUBLE_EQ(alice.factor, vision.factor);  // used nothing
  const ShareRow& bob = rows[5];
  EXPECT_DOUBLE_EQ(bob.norm_usage, 1.0);
  EXPECT_DOUBLE_EQ(bob.factor, fs.Factor(config, "vision", "bob", Millis(0)));
  EXPECT_LT(bob.factor, alice.factor);
}

TEST(FairShareTest, RowsAgreeWithFactorForEveryAccountAndUser) {
  // Listed and unlisted accounts and users, some idle, some with usage.
  config::ClusterConfig config;
  for (int a = 0; a < 6; ++a) {
    std::vector<std::pair<std::string, int>> users;
    if (a % 2 == 0) {
      for (int u = 0; u < 3; ++u) users.emplace_back("u" + std::to_string(u), 1 + (a + u) % 3);
    }
    config.accounts.push_back(Account("a" + std::to_string(a), 1 + a, users));
  }
  FairShare fs(kHalfLife);
  for (int i = 0; i < 60; ++i) {
    fs.Charge("a" + std::to_string(i % 9), "u" + std::to_string(i % 5), 10.0 + i,
              Millis(i * 60'000));
  }
  const Millis now = 2 * kHour;
  const std::vector<ShareRow> rows = fs.Rows(config, now);
  ASSERT_EQ(rows.size(), 9U * (1 + 5));  // a0..a8, each with u0..u4
  for (const ShareRow& row : rows) {
    if (row.user.empty()) continue;
    EXPECT_DOUBLE_EQ(row.factor, fs.Factor(config, row.account, row.user, now))
        << row.account << " " << row.user;
  }
}

TEST(FairShareTest, SnapshotAndRestoreRoundTrip) {
  FairShare fs(kHalfLife);
  const config::ClusterConfig config =
      Config({Account("ml", 2, {{"alice", 2}, {"bob", 1}}), Account("nlp", 1)});
  fs.Charge("ml", "alice", 500, Millis(0));
  fs.Charge("ml", "bob", 50, kHour / 2);
  fs.Charge("nlp", "carol", 200, kHour);
  const std::vector<UsageRecord> snapshot = fs.Snapshot(kHour);
  ASSERT_EQ(snapshot.size(), 5U);  // 2 accounts, 3 users
  for (const UsageRecord& record : snapshot) EXPECT_EQ(record.as_of, kHour);

  FairShare restored(kHalfLife);
  restored.Charge("stale", "x", 1, Millis(0));  // replaced, not merged
  restored.Restore(snapshot);
  for (const Millis at : {kHour, 3 * kHour}) {
    EXPECT_DOUBLE_EQ(restored.Usage("ml", at), fs.Usage("ml", at));
    EXPECT_DOUBLE_EQ(restored.UserUsage("ml", "alice", at), fs.UserUsage("ml", "alice", at));
    EXPECT_DOUBLE_EQ(restored.UserUsage("nlp", "carol", at), fs.UserUsage("nlp", "carol", at));
    for (const auto& [account, user] : std::vector<std::pair<std::string, std::string>>{
             {"ml", "alice"}, {"ml", "bob"}, {"nlp", "carol"}}) {
      EXPECT_DOUBLE_EQ(restored.Factor(config, account, user, at),
                       fs.Factor(config, account, user, at))
          << account << " " << user;
    }
  }
  EXPECT_EQ(restored.Usage("stale", kHour), 0.0);
}

TEST(FairShareTest, RestoreRebuildsAMissingAccountTotalAndDropsBadValues) {
  FairShare fs(kHalfLife);
  fs.Restore({{"ml", "alice", 100, Millis(0)},
              {"ml", "bob", 100, kHour},
              {"ml", "eve", std::numeric_limits<double>::quiet_NaN(), Millis(0)},
              {"nlp", "", -3, Millis(0)}});
  // alice's 100 decays to 50 by bob's time.
  EXPECT_DOUBLE_EQ(fs.Usage("ml", kHour), 150);
  EXPECT_EQ(fs.UserUsage("ml", "eve", kHour), 0.0);
  EXPECT_EQ(fs.Usage("nlp", kHour), 0.0);
}

TEST(FairShareTest, AChargeWithoutAUserCountsForTheAccountOnly) {
  FairShare fs(kHalfLife);
  fs.Charge("a", "", 100, Millis(0));
  EXPECT_DOUBLE_EQ(fs.Usage("a", Millis(0)), 100);
  const std::vector<UsageRecord> snapshot = fs.Snapshot(Millis(0));
  ASSERT_EQ(snapshot.size(), 1U);
  EXPECT_EQ(snapshot[0].user, "");
}

}  // namespace
}  // namespace cohort::policy
