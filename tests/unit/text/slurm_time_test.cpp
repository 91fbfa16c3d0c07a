// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/slurm_time.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cohort/text/slurm_memory.h"

namespace cohort {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

seconds MustParseTime(std::string_view text) {
  const absl::StatusOr<seconds> limit = ParseSlurmTime(text);
  EXPECT_TRUE(limit.ok()) << text << ": " << limit.status();
  return limit.ok() ? *limit : seconds(-1);
}

std::int64_t MustParseMemory(std::string_view text) {
  const absl::StatusOr<std::int64_t> mb = ParseSlurmMemoryMb(text);
  EXPECT_TRUE(mb.ok()) << text << ": " << mb.status();
  return mb.ok() ? *mb : -1;
}

// --- ParseSlurmTime ----------------------------------------------------------

TEST(ParseSlurmTimeTest, BareNumberIsMinutes) {
  EXPECT_EQ(MustParseTime("90"), minutes(90));
  EXPECT_EQ(MustParseTime("0"), seconds(0));
}

TEST(ParseSlurmTimeTest, TwoFieldsAreMinutesAndSeconds) {
  EXPECT_EQ(MustParseTime("05:30"), minutes(5) + seconds(30));
  EXPECT_EQ(MustParseTime("90:00"), minutes(90));
}

TEST(ParseSlurmTimeTest, ThreeFieldsAreHoursMinutesSeconds) {
  EXPECT_EQ(MustParseTime("1:30:00"), hours(1) + minutes(30));
  EXPECT_EQ(MustParseTime("00:00:07"), seconds(7));
}

TEST(ParseSlurmTimeTest, DayForms) {
  EXPECT_EQ(MustParseTime("2-00:00:00"), days(2));
  EXPECT_EQ(MustParseTime("1-12"), days(1) + hours(12));
  EXPECT_EQ(MustParseTime("1-12:30"), days(1) + hours(12) + minutes(30));
  EXPECT_EQ(MustParseTime("0-00:00:45"), seconds(45));
}

TEST(ParseSlurmTimeTest, UnlimitedInAnyCase) {
  EXPECT_EQ(MustParseTime("UNLIMITED"), kUnlimited);
  EXPECT_EQ(MustParseTime("unlimited"), kUnlimited);
  EXPECT_EQ(MustParseTime("infinite"), kUnlimited);
  EXPECT_EQ(MustParseTime("INFINITE"), kUnlimited);
}

TEST(ParseSlurmTimeTest, RejectsMalformedNamingTheAcceptedForms) {
  for (const std::string_view bad : {"", "1:2:3:4", "-5", "abc", "1-", ":30", "1:", "1-2:3:4:5",
                                     "1:-2", "1.5", "x-01:00", "1-2-3", " 90"}) {
    const absl::StatusOr<seconds> limit = ParseSlurmTime(bad);
    ASSERT_FALSE(limit.ok()) << '"' << bad << "\" parsed as " << limit->count() << "s";
    EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    const std::string message(limit.status().message());
    EXPECT_NE(message.find(std::string("\"") + std::string(bad) + "\""), std::string::npos)
        << message;
    EXPECT_NE(message.find("use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                           "D-HH:MM:SS or UNLIMITED"),
              std::string::npos)
        << message;
  }
}

TEST(ParseSlurmTimeTest, MessagesSayWhatIsWrong) {
  EXPECT_NE(ParseSlurmTime("1:2:3:4").status().message().find("too many ':' fields"),
            std::string_view::npos);
  EXPECT_NE(ParseSlurmTime(":30").status().message().find("empty field"), std::string_view::npos);
  EXPECT_NE(ParseSlurmTime("abc").status().message().find("\"abc\" is not a non-negative number"),
            std::string_view::npos);
  EXPECT_NE(ParseSlurmTime("-5").status().message().find("is not a number of days"),
            std::string_view::npos);
}

TEST(ParseSlurmTimeTest, RejectsHugeFields) {
  EXPECT_FALSE(ParseSlurmTime("100000001").ok());
  EXPECT_FALSE(ParseSlurmTime("100001-00:00:00").ok());
  EXPECT_FALSE(ParseSlurmTime("99999999999999999999").ok());
}

// --- FormatSlurmTime ---------------------------------------------------------

TEST(FormatSlurmTimeTest, ShowsHoursMinutesSecondsAndDays) {
  EXPECT_EQ(FormatSlurmTime(seconds(0)), "00:00:00");
  EXPECT_EQ(FormatSlurmTime(minutes(90)), "01:30:00");
  EXPECT_EQ(FormatSlurmTime(days(2)), "2-00:00:00");
  EXPECT_EQ(FormatSlurmTime(days(1) + hours(2) + minutes(3) + seconds(4)), "1-02:03:04");
  EXPECT_EQ(FormatSlurmTime(kUnlimited), "UNLIMITED");
}

TEST(FormatSlurmTimeTest, CanonicalTextRoundTrips) {
  for (const std::string_view text : {"00:00:00", "00:00:59", "01:30:00", "23:59:59", "1-00:00:00",
                                      "2-12:30:15", "365-00:00:01", "UNLIMITED"}) {
    EXPECT_EQ(FormatSlurmTime(MustParseTime(text)), text);
  }
}

TEST(FormatSlurmTimeTest, ParsingTheFormattedLimitGivesItBack) {
  for (const seconds limit :
       std::initializer_list<seconds>{seconds(0), seconds(1), minutes(90), hours(47) + seconds(3),
                                      days(30) + seconds(86399), kUnlimited}) {
    EXPECT_EQ(MustParseTime(FormatSlurmTime(limit)), limit) << FormatSlurmTime(limit);
  }
}

// --- ParseSlurmMemoryMb ------------------------------------------------------

TEST(ParseSlurmMemoryTest, Units) {
  EXPECT_EQ(MustParseMemory("16G"), 16 * 1024);
  EXPECT_EQ(MustParseMemory("512M"), 512);
  EXPECT_EQ(MustParseMemory("1T"), 1024 * 1024);
  EXPECT_EQ(MustParseMemory("2048K"), 2);
}

TEST(ParseSlurmMemoryTest, UnitsInAnyCase) {
  EXPECT_EQ(MustParseMemory("16g"), 16 * 1024);
  EXPECT_EQ(MustParseMemory("512m"), 512);
  EXPECT_EQ(MustParseMemory("1t"), 1024 * 1024);
}

TEST(ParseSlurmMemoryTest, AcceptsABAfterTheUnitAsSlurmDoes) {
  EXPECT_EQ(MustParseMemory("16GB"), 16 * 1024);
  EXPECT_EQ(MustParseMemory("512mb"), 512);
  EXPECT_EQ(MustParseMemory("2TB"), 2 * 1024 * 1024);
}

TEST(ParseSlurmMemoryTest, BareNumberIsMegabytes) {
  EXPECT_EQ(MustParseMemory("16000"), 16000);
  EXPECT_EQ(MustParseMemory("0"), 0);
}

TEST(ParseSlurmMemoryTest, KilobytesRoundUpToWholeMegabytes) {
  EXPECT_EQ(MustParseMemory("1k"), 1);
  EXPECT_EQ(MustParseMemory("1025K"), 2);
  EXPECT_EQ(MustParseMemory("0K"), 0);
}

TEST(ParseSlurmMemoryTest, RejectsMalformedNamingTheAcceptedForms) {
  for (const std::string_view bad :
       {"16X", "-1", "", "G", "1.5G", "16B", "GB", "16GBB", "16XB", "+4G", " 16G"}) {
    const absl::StatusOr<std::int64_t> mb = ParseSlurmMemoryMb(bad);
    ASSERT_FALSE(mb.ok()) << '"' << bad << "\" parsed as " << *mb;
    EXPECT_EQ(mb.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(mb.status().message(),
              "memory \"" + std::string(bad) +
                  "\": use megabytes (16000) or a size with a unit (16G, 16GB, 512M, 1T)");
  }
}

TEST(ParseSlurmMemoryTest, RejectsSizesThatOverflow) {
  // 2^40 T would be 2^70 KB: refused, not wrapped to a negative size.
  EXPECT_FALSE(ParseSlurmMemoryMb("1099511627776T").ok());
  EXPECT_FALSE(ParseSlurmMemoryMb("10000000000T").ok());
  EXPECT_FALSE(ParseSlurmMemoryMb("1099511627777").ok());
  EXPECT_EQ(MustParseMemory("1000000T"), 1000000LL * 1024 * 1024);
}

}  // namespace
}  // namespace cohort
