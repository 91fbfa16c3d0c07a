// SPDX-License-Identifier: Apache-2.0
#include "proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace cohort::step {
namespace {

TEST(ProcStatTest, ReadsStateAndStartTimePastAnOddCommandName) {
  const std::optional<ProcessStat> stat = ParseProcessStat(
      "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 120 0 "
      "0 0 3 1 0 0 20 0 1 0 98765 "
      "8192000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 "
      "0 17 3 0 0 0 0 0\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->start_time, 98765);
}

TEST(ProcStatTest, RefusesTruncatedText) {
  EXPECT_FALSE(ParseProcessStat(""));
  EXPECT_FALSE(ParseProcessStat("12 (sh) S 1 2 3"));
  EXPECT_FALSE(ParseProcessStat("12 sh S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"));
}

TEST(ProcStatTest, ThisProcessIsAliveAndAnotherStartTimeIsNot) {
  const std::optional<ProcessStat> self = ReadProcessStat(::getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->state, 'R');
  EXPECT_TRUE(ProcessAlive(::getpid(), self->start_time));
  EXPECT_FALSE(ProcessAlive(::getpid(), self->start_time + 1));
  EXPECT_FALSE(ProcessAlive(0, 0));
}

}  // namespace
}  // namespace cohort::step
