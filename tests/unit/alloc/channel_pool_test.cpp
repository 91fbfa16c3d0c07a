// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/channel_pool.h"

#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::alloc {
namespace {

TEST(ChannelPoolTest, LowestFreeFirstAndNoneWhenAllAreHeld) {
  ChannelPool pool(3);
  EXPECT_EQ(pool.Take(), 0);
  EXPECT_EQ(pool.Take(), 1);
  EXPECT_EQ(pool.Take(), 2);
  EXPECT_EQ(pool.Take(), std::nullopt);
  pool.Give(1);
  EXPECT_EQ(pool.FreeCount(), 1);
  EXPECT_EQ(pool.Take(), 1);
  EXPECT_EQ(ChannelPool(0).Take(), std::nullopt);
}

TEST(ChannelPoolTest, RestoreRefusesOutOfRangeAndHeldChannels) {
  ChannelPool pool(4);
  EXPECT_TRUE(pool.Restore(2));
  EXPECT_FALSE(pool.Restore(2));
  EXPECT_FALSE(pool.Restore(4));
  EXPECT_FALSE(pool.Restore(-1));
  EXPECT_EQ(pool.Take(), 0);
  EXPECT_EQ(pool.Take(), 1);
  EXPECT_EQ(pool.Take(), 3);
  EXPECT_EQ(pool.FreeCount(), 0);
}

TEST(ChannelPoolTest, GivingBackAFreeChannelIsABug) {
  ChannelPool pool(2);
  EXPECT_DEATH(pool.Give(0), "not held");
}

// 10,000 random takes and gives: a channel is never handed to two holders.
TEST(ChannelPoolTest, RandomTakesAndGivesNeverCollide) {
  std::mt19937 random(2048);
  ChannelPool pool(64);
  std::vector<int> held;
  std::set<int> owned;
  for (int i = 0; i < 10'000; ++i) {
    if (held.empty() || random() % 2 == 0) {
      const std::optional<int> channel = pool.Take();
      if (!channel) {
        ASSERT_EQ(owned.size(), 64U);
        continue;
      }
      ASSERT_TRUE(owned.insert(*channel).second) << "channel " << *channel << " taken twice";
      held.push_back(*channel);
    } else {
      const std::size_t at = random() % held.size();
      pool.Give(held[at]);
      owned.erase(held[at]);
      held[at] = held.back();
      held.pop_back();
    }
    ASSERT_EQ(pool.FreeCount(), 64 - static_cast<int>(owned.size()));
  }
}

}  // namespace
}  // namespace cohort::alloc
