// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/array_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace cohort {
namespace {

using Ids = std::vector<int>;
constexpr int kMax = 10001;

ArraySpec MustParse(std::string_view text, int max_size = kMax) {
  absl::StatusOr<ArraySpec> spec = ParseArraySpec(text, max_size);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status();
  return spec.ok() ? *spec : ArraySpec{};
}

// The error message of a bad spec; fails the test when it parses.
std::string ErrorOf(std::string_view text, int max_size = kMax) {
  absl::StatusOr<ArraySpec> spec = ParseArraySpec(text, max_size);
  EXPECT_FALSE(spec.ok()) << text << " parsed";
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(spec.status().message());
}

Ids Range(int first, int last) {
  Ids ids;
  for (int i = first; i <= last; ++i) ids.push_back(i);
  return ids;
}

TEST(ArraySpecTest, ARange) {
  const ArraySpec spec = MustParse("0-999");
  EXPECT_EQ(spec.tasks, Range(0, 999));
  EXPECT_EQ(spec.max_running, 0);
  EXPECT_EQ(spec.step, 1);
}

TEST(ArraySpecTest, AListOfIdsAndSteppedRanges) {
  const ArraySpec spec = MustParse("1,5,9-15:2");
  EXPECT_EQ(spec.tasks, (Ids{1, 5, 9, 11, 13, 15}));
  EXPECT_EQ(spec.step, 1);  // a list has no single step
}

TEST(ArraySpecTest, ARangeWithAStepKeepsIt) {
  const ArraySpec spec = MustParse("0-10:5");
  EXPECT_EQ(spec.tasks, (Ids{0, 5, 10}));
  EXPECT_EQ(spec.step, 5);
  EXPECT_EQ(MustParse("1-10:4").tasks, (Ids{1, 5, 9}));  // the last id need not be hit
}

TEST(ArraySpecTest, PercentBoundsTheTasksRunningAtOnce) {
  const ArraySpec spec = MustParse("0-99%8");
  EXPECT_EQ(spec.tasks, Range(0, 99));
  EXPECT_EQ(spec.max_running, 8);
}

TEST(ArraySpecTest, OneId) {
  const ArraySpec spec = MustParse("7");
  EXPECT_EQ(spec.tasks, (Ids{7}));
  EXPECT_EQ(spec.step, 1);
}

TEST(ArraySpecTest, IdsComeOutAscendingAndOnce) {
  EXPECT_EQ(MustParse("9,3,1-4,3").tasks, (Ids{1, 2, 3, 4, 9}));
}

TEST(ArraySpecTest, TheLastIdBelowMaxArraySize) {
  EXPECT_EQ(MustParse("0-9", 10).tasks, Range(0, 9));
  EXPECT_EQ(MustParse("0", 1).tasks, (Ids{0}));
}

TEST(ArraySpecTest, Errors) {
  EXPECT_EQ(ErrorOf(""), "array: empty; give task ids such as 0-9, 1,5,7 or 0-99%8");
  EXPECT_EQ(ErrorOf("5-2"), "array: \"5-2\": a range must go up, as 2-5");
  EXPECT_EQ(ErrorOf("1,,3"), "array: \"1,,3\": an empty item between commas; remove the extra ','");
  EXPECT_EQ(ErrorOf("1,"), "array: \"1,\": an empty item between commas; remove the extra ','");
  EXPECT_EQ(ErrorOf("1-9:0"), "array: \"1-9:0\": the step must be 1 or more");
  EXPECT_EQ(ErrorOf("1-9:x"),
            "array: \"1-9:x\": the step after ':' must be a whole number, as 1-9:2");
  EXPECT_EQ(ErrorOf("1-9:-2"),
            "array: \"1-9:-2\": the step after ':' must be a whole number, as 1-9:2");
  EXPECT_EQ(ErrorOf("3:2"), "array: \"3:2\": a step belongs to a range, as 1-9:2");
  EXPECT_EQ(ErrorOf("0-10", 10), "array: \"0-10\": task ids go from 0 to 9 (MaxArraySize=10)");
  EXPECT_EQ(ErrorOf("12", 10), "array: \"12\": task ids go from 0 to 9 (MaxArraySize=10)");
  EXPECT_EQ(ErrorOf("0-9%0"),
            "array: \"0-9%0\": after '%' comes how many tasks may run at once, from 1 to 10001, "
            "as 0-99%8");
  EXPECT_TRUE(ErrorOf("%0").starts_with("array: \"%0\": after '%'"));
  EXPECT_EQ(ErrorOf("0-9%"),
            "array: \"0-9%\": after '%' comes how many tasks may run at once, from 1 to 10001, "
            "as 0-99%8");
  EXPECT_TRUE(ErrorOf("0-9%2%3").starts_with("array: \"0-9%2%3\": after '%'"));
  EXPECT_EQ(ErrorOf("%5"), "array: \"%5\": no task ids before '%'; write them as 0-99%8");
  EXPECT_EQ(ErrorOf("abc"),
            "array: \"abc\": not a task id; use ids such as 7, ranges such as 0-9 or 1-9:2");
  EXPECT_EQ(ErrorOf("-5"), "array: \"-5\": a range is FIRST-LAST with non-negative ids, as 0-9");
  EXPECT_EQ(ErrorOf("1-"), "array: \"1-\": a range is FIRST-LAST with non-negative ids, as 0-9");
  EXPECT_EQ(ErrorOf("1-2-3"),
            "array: \"1-2-3\": a range is FIRST-LAST with non-negative ids, as 0-9");
  EXPECT_EQ(ErrorOf(" 1"),
            "array: \" 1\": not a task id; use ids such as 7, ranges such as 0-9 or 1-9:2");
  EXPECT_EQ(ErrorOf("99999999999999999999"),
            "array: \"99999999999999999999\": not a task id; use ids such as 7, ranges such as "
            "0-9 or 1-9:2");
  EXPECT_EQ(ErrorOf("0-9,0-9", 12),
            "array: \"0-9,0-9\": more than 12 tasks (MaxArraySize), counting repeats; ask for "
            "fewer");
  EXPECT_EQ(ErrorOf("1", 0), "array: MaxArraySize=0 allows no tasks; set it to 1 or more");
}

TEST(ArraySpecTest, FormatCompressesRuns) {
  EXPECT_EQ(FormatArrayTasks({0, 1, 2, 3, 5, 7, 8, 9}, 8), "0-3,5,7-9%8");
  EXPECT_EQ(FormatArrayTasks(Range(0, 999)), "0-999");
  EXPECT_EQ(FormatArrayTasks({4}), "4");
  EXPECT_EQ(FormatArrayTasks({1, 3, 5}), "1,3,5");  // no steps are inferred
  EXPECT_EQ(FormatArrayTasks({5, 1, 2, 2}), "1-2,5");
  EXPECT_EQ(FormatArrayTasks({}), "");
}

TEST(ArraySpecTest, FormatParsesBackToTheSameTasks) {
  for (const std::string_view text : {"1,5,9-15:2", "0-99%8", "3,0-2,7-8"}) {
    const ArraySpec spec = MustParse(text);
    const ArraySpec again = MustParse(FormatArrayTasks(spec.tasks, spec.max_running));
    EXPECT_EQ(again.tasks, spec.tasks) << text;
    EXPECT_EQ(again.max_running, spec.max_running) << text;
  }
}

}  // namespace
}  // namespace cohort
