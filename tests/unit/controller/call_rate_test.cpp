// SPDX-License-Identifier: Apache-2.0
// Each user's calls a second (daemons/controller/rpc/call_rate.cpp): a burst,
// then the sustained rate; users apart from each other; callers nobody
// vouched for together; root never counted.
#include "rpc/call_rate.h"

#include <gtest/gtest.h>

namespace cohort::controller {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CallRateTest, ABurstThenTheRateAndEachUserApart) {
  CallRate rate({.per_second = 10, .burst = 20, .anonymous_per_second = 50, .users = 100});
  const Clock::time_point start{};
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(rate.Admit(1000, start).ok()) << i;
  const absl::Status refused = rate.Admit(1000, start);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("uid 1000 made more than 10 calls a second; try again"),
            std::string_view::npos)
      << refused.message();
  // Another user is not held back by the first.
  EXPECT_TRUE(rate.Admit(1001, start).ok());
  // A tenth of a second later, one more call.
  EXPECT_TRUE(rate.Admit(1000, start + std::chrono::milliseconds(100)).ok());
  EXPECT_FALSE(rate.Admit(1000, start + std::chrono::milliseconds(100)).ok());
  EXPECT_EQ(rate.Refused(), 2U);
  // Root is never counted.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(rate.Admit(0, start).ok());
}

TEST(CallRateTest, AnonymousCallersShareOneBucket) {
  CallRate rate({.per_second = 10, .burst = 20, .anonymous_per_second = 5, .users = 100});
  const Clock::time_point start{};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(rate.Admit(std::nullopt, start).ok()) << i;
  const absl::Status refused = rate.Admit(std::nullopt, start);
  EXPECT_NE(refused.message().find("anonymous callers"), std::string_view::npos);
}

TEST(CallRateTest, BucketsAreBoundedAndFullOnesGoFirst) {
  CallRate rate({.per_second = 10, .burst = 20, .anonymous_per_second = 5, .users = 4});
  const Clock::time_point start{};
  for (std::uint32_t uid = 1; uid <= 4; ++uid) ASSERT_TRUE(rate.Admit(uid, start).ok());
  // Later, every bucket is full again: a fifth user fits.
  EXPECT_TRUE(rate.Admit(5, start + std::chrono::seconds(5)).ok());
  // A user who spent their bucket keeps the debt.
  for (int i = 0; i < 19; ++i) ASSERT_TRUE(rate.Admit(5, start + std::chrono::seconds(5)).ok());
  EXPECT_FALSE(rate.Admit(5, start + std::chrono::seconds(5)).ok());
}

}  // namespace
}  // namespace cohort::controller
