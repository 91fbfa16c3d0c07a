// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/hostlist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace cohort::hostlist {
namespace {

using Names = std::vector<std::string>;

Names MustExpand(std::string_view hostlist) {
  absl::StatusOr<Names> names = Expand(hostlist);
  EXPECT_TRUE(names.ok()) << hostlist << ": " << names.status();
  return names.ok() ? *names : Names{};
}

std::string ZeroPadded(int value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

Names SortedUnique(Names names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// --- Expand ------------------------------------------------------------------

TEST(HostlistExpandTest, PlainName) { EXPECT_EQ(MustExpand("login1"), (Names{"login1"})); }

TEST(HostlistExpandTest, RangeKeepsZeroPadding) {
  const Names names = MustExpand("gpu[001-064]");
  ASSERT_EQ(names.size(), 64U);
  for (int i = 1; i <= 64; ++i) EXPECT_EQ(names[i - 1], "gpu" + ZeroPadded(i, 3));
}

TEST(HostlistExpandTest, SeveralBracketsLeftmostVariesSlowest) {
  EXPECT_EQ(MustExpand("rack[1-2]-n[01-04]"),
            (Names{"rack1-n01", "rack1-n02", "rack1-n03", "rack1-n04", "rack2-n01", "rack2-n02",
                   "rack2-n03", "rack2-n04"}));
}

TEST(HostlistExpandTest, AdjacentBracketsAndSuffix) {
  EXPECT_EQ(MustExpand("a[1-2][3-4]"), (Names{"a13", "a14", "a23", "a24"}));
  EXPECT_EQ(MustExpand("n[1-2].ib"), (Names{"n1.ib", "n2.ib"}));
  EXPECT_EQ(MustExpand("[7-8]"), (Names{"7", "8"}));
}

TEST(HostlistExpandTest, ListInsideBrackets) {
  EXPECT_EQ(MustExpand("a[1,3,5-7]"), (Names{"a1", "a3", "a5", "a6", "a7"}));
}

TEST(HostlistExpandTest, CommaListAndBracketCommas) {
  EXPECT_EQ(MustExpand("a1,b[2-3]"), (Names{"a1", "b2", "b3"}));
  EXPECT_EQ(MustExpand("b[2,4],c"), (Names{"b2", "b4", "c"}));
}

TEST(HostlistExpandTest, KeepsOrderAndDuplicatesAsWritten) {
  EXPECT_EQ(MustExpand("b2,a1,b2"), (Names{"b2", "a1", "b2"}));
  EXPECT_EQ(MustExpand("a[3,1,1]"), (Names{"a3", "a1", "a1"}));
}

TEST(HostlistExpandTest, PaddingFollowsTheLowerEnd) {
  EXPECT_EQ(MustExpand("a[1-10]").back(), "a10");
  EXPECT_EQ(MustExpand("a[1-10]").front(), "a1");
  EXPECT_EQ(MustExpand("a[01-10]"),
            (Names{"a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09", "a10"}));
  EXPECT_EQ(MustExpand("a[08-11]"), (Names{"a08", "a09", "a10", "a11"}));
  EXPECT_EQ(MustExpand("a[098-101]"), (Names{"a098", "a099", "a100", "a101"}));
  EXPECT_EQ(MustExpand("a[98-101]"), (Names{"a98", "a99", "a100", "a101"}));
  EXPECT_EQ(MustExpand("a[01-5]"), (Names{"a01", "a02", "a03", "a04", "a05"}));
  EXPECT_EQ(MustExpand("a[0-1]"), (Names{"a0", "a1"}));
  EXPECT_EQ(MustExpand("a[00]"), (Names{"a00"}));
  EXPECT_EQ(MustExpand("a[1,01,001]"), (Names{"a1", "a01", "a001"}));
}

TEST(HostlistExpandTest, TrimsWhitespaceAroundTheWholeList) {
  EXPECT_EQ(MustExpand("  a[1-2]\t\n"), (Names{"a1", "a2"}));
}

TEST(HostlistExpandTest, LargestNumbers) {
  EXPECT_EQ(MustExpand("a[999999999999999998-999999999999999999]"),
            (Names{"a999999999999999998", "a999999999999999999"}));
  // Digits outside brackets are plain text, whatever their length.
  EXPECT_EQ(MustExpand("a12345678901234567890123"), (Names{"a12345678901234567890123"}));
}

struct BadHostlist {
  std::string_view hostlist;
  std::size_t position;
  std::string_view says;
};

void PrintTo(const BadHostlist& bad, std::ostream* out) { *out << '"' << bad.hostlist << '"'; }

class HostlistExpandErrorTest : public testing::TestWithParam<BadHostlist> {};

TEST_P(HostlistExpandErrorTest, NamesPositionAndFix) {
  const BadHostlist& bad = GetParam();
  const absl::StatusOr<Names> names = Expand(bad.hostlist);
  ASSERT_FALSE(names.ok()) << bad.hostlist;
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(names.status().message());
  EXPECT_NE(message.find("position " + std::to_string(bad.position) + ":"), std::string::npos)
      << message;
  EXPECT_NE(message.find(bad.says), std::string::npos) << message;
  EXPECT_NE(message.find("; "), std::string::npos) << "no fix suggested: " << message;
  EXPECT_TRUE(message.starts_with("hostlist \"")) << message;
  EXPECT_NE(message.back(), '.') << message;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, HostlistExpandErrorTest,
    testing::Values(BadHostlist{"gpu[3-1]", 5, "range 3-1 runs backwards; write it as 1-3"},
                    BadHostlist{"gpu[03-01]", 5, "write it as 01-03"},
                    BadHostlist{"gpu[10-9]", 5, "write it as 9-10"},
                    BadHostlist{"gpu[1-", 7, "range 1- has no upper end"},
                    BadHostlist{"gpu[1-]", 7, "range 1- has no upper end"},
                    BadHostlist{"a[]", 3, "empty brackets"},
                    BadHostlist{"a[x-y]", 3, "expected a number, found 'x'"},
                    BadHostlist{"a[1-y]", 5, "expected a number, found 'y'"},
                    BadHostlist{"a[1-2", 6, "bracket opened at position 2 is not closed"},
                    BadHostlist{"a[", 3, "bracket opened at position 2 is not closed"},
                    BadHostlist{"a]", 2, "']' has no matching '['"},
                    BadHostlist{"a[[1]]", 3, "brackets do not nest"},
                    BadHostlist{"a,,b", 3, "empty name; remove the extra ','"},
                    BadHostlist{",a", 1, "empty name"},
                    BadHostlist{"a,", 3, "empty name after the last ','"},
                    BadHostlist{"", 1, "hostlist is empty"},
                    BadHostlist{"  \t", 1, "hostlist is empty"},
                    BadHostlist{"a, b", 3, "whitespace inside a hostlist"},
                    BadHostlist{"a[1, 2]", 5, "whitespace inside a hostlist"},
                    BadHostlist{"a[1,]", 5, "empty item in brackets"},
                    BadHostlist{"a[,1]", 3, "empty item in brackets"},
                    BadHostlist{"a[1-2-3]", 6, "expected ',' or ']' after 1-2, found '-'"},
                    BadHostlist{"a[1x]", 4, "found 'x'"},
                    BadHostlist{"a[001-05]", 7, "write both with 3 digits, as 001-005"},
                    BadHostlist{"a[1-010]", 5, "as 001-010"},
                    BadHostlist{"a[1234567890123456789]", 3, "number has 19 digits"},
                    BadHostlist{"ok1,a[1-2", 10, "bracket opened at position 6"}));

TEST(HostlistExpandTest, ErrorMessageShape) {
  const absl::StatusOr<Names> names = Expand("gpu[3-1]");
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().message(),
            "hostlist \"gpu[3-1]\": position 5: range 3-1 runs backwards; write it as 1-3");
}

TEST(HostlistExpandTest, PositionsCountLeadingWhitespace) {
  const absl::StatusOr<Names> names = Expand("  a[2-1]");
  ASSERT_FALSE(names.ok());
  EXPECT_NE(names.status().message().find("position 5:"), std::string::npos)
      << names.status().message();
}

TEST(HostlistExpandTest, LongHostlistIsCutInMessage) {
  const std::string hostlist = std::string(200, 'a') + "]";
  const absl::StatusOr<Names> names = Expand(hostlist);
  ASSERT_FALSE(names.ok());
  EXPECT_NE(names.status().message().find("...\": position 201:"), std::string::npos)
      << names.status().message();
}

// --- the limit ---------------------------------------------------------------

void ExpectRefused(std::string_view hostlist, std::size_t max_names, std::size_t position) {
  const absl::StatusOr<Names> names = Expand(hostlist, max_names);
  ASSERT_FALSE(names.ok()) << hostlist;
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(names.status().message());
  EXPECT_NE(message.find("position " + std::to_string(position) + ":"), std::string::npos)
      << message;
  EXPECT_NE(message.find("exceeds the limit of " + std::to_string(max_names) + " names"),
            std::string::npos)
      << message;
}

// These would take minutes and gigabytes if they were materialised first.
TEST(HostlistLimitTest, RefusesHugeExpansionsBeforeProducingThem) {
  ExpectRefused("n[1-1000000000]", kMaxNames, 1);
  ExpectRefused("a[1-1000]b[1-1000]c[1-1000]", kMaxNames, 1);
  ExpectRefused("a[1-999999999999999999]b[1-999999999999999999]c[1-999999999999999999]", kMaxNames,
                1);
  ExpectRefused("x[1-999999999999999999,1-999999999999999999,1-999999999999999999]", kMaxNames, 1);
}

TEST(HostlistLimitTest, CountsAcrossElements) {
  EXPECT_TRUE(Expand("a[1-4]", 4).ok());
  ExpectRefused("a[1-5]", 4, 1);
  ExpectRefused("a[1-3],b[1-2]", 4, 8);
  ExpectRefused("a,b", 1, 3);
  ExpectRefused("a", 0, 1);
}

TEST(HostlistLimitTest, AllowsExactlyTheLimit) {
  const absl::StatusOr<Names> names = Expand("n[1-10]m[1-10]", 100);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 100U);
  ExpectRefused("n[1-10]m[1-10],x", 100, 16);
}

TEST(HostlistLimitTest, DefaultLimitIsAMillion) {
  EXPECT_EQ(kMaxNames, 1'000'000U);
  ExpectRefused("n[1-1000]m[1-1001]", kMaxNames, 1);
  ExpectRefused("a,n[1-1000]m[1-1000]", kMaxNames, 3);
}

// --- Compress ----------------------------------------------------------------

TEST(HostlistCompressTest, EmptyAndSingle) {
  EXPECT_EQ(Compress({}), "");
  EXPECT_EQ(Compress(Names{"a1"}), "a1");
  EXPECT_EQ(Compress(Names{"login"}), "login");
  EXPECT_EQ(Compress(Names{"", "a1", ""}), "a1");
}

TEST(HostlistCompressTest, FoldsARun) {
  EXPECT_EQ(Compress(MustExpand("gpu[001-064]")), "gpu[001-064]");
  EXPECT_EQ(Compress(Names{"a1", "a2"}), "a[1-2]");
}

TEST(HostlistCompressTest, FoldsAListOfRuns) {
  EXPECT_EQ(Compress(Names{"a7", "a3", "a1", "a5", "a6"}), "a[1,3,5-7]");
}

TEST(HostlistCompressTest, FoldsAFullProduct) {
  Names names = MustExpand("rack[1-2]-n[01-04]");
  std::reverse(names.begin(), names.end());
  EXPECT_EQ(Compress(names), "rack[1-2]-n[01-04]");
  EXPECT_EQ(Compress(MustExpand("a[1-2]b[1-3]c[1-2]")), "a[1-2]b[1-3]c[1-2]");
  EXPECT_EQ(Compress(MustExpand("s[1,3]-r[5-6]-n[001-032]")), "s[1,3]-r[5-6]-n[001-032]");
}

TEST(HostlistCompressTest, KeepsAPartialProductApart) {
  EXPECT_EQ(Compress(MustExpand("r1-n[1-4],r2-n[1-2]")), "r1-n[1-4],r2-n[1-2]");
  EXPECT_EQ(Compress(MustExpand("r[1-2]-n[1-2],r3-n1")), "r[1-2]-n[1-2],r3-n1");
}

TEST(HostlistCompressTest, RemovesDuplicatesAndSortsNaturally) {
  EXPECT_EQ(Compress(Names{"b3", "a10", "a2", "b3", "a2", "a9"}), "a[2,9-10],b3");
  EXPECT_EQ(Compress(Names{"login", "alpha", "gpu2"}), "alpha,gpu2,login");
  EXPECT_EQ(Compress(Names{"b[2-3]", "a1"}), "a1,b[2-3]");
  EXPECT_EQ(Compress(MustExpand("a1,b[2-3]")), "a1,b[2-3]");
}

TEST(HostlistCompressTest, DifferentPaddingNeverSharesABracket) {
  EXPECT_EQ(Compress(Names{"a01", "a1"}), "a1,a01");
  EXPECT_EQ(Compress(Names{"a1", "a2", "a01", "a02", "a001"}), "a[1-2],a[01-02],a001");
}

TEST(HostlistCompressTest, UnpaddedNumbersJoinThePaddedRunTheyContinue) {
  EXPECT_EQ(Compress(Names{"a08", "a09", "a10", "a11"}), "a[08-11]");
  EXPECT_EQ(Compress(MustExpand("a[098-101]")), "a[098-101]");
  EXPECT_EQ(Compress(MustExpand("a[01-100]")), "a[01-100]");
  EXPECT_EQ(Compress(MustExpand("a[1-100]")), "a[1-100]");
}

TEST(HostlistCompressTest, OrdersGroupsByTheirFirstName) {
  // a2b sorts between a1 and a3, but a1 and a3 still share a bracket.
  EXPECT_EQ(Compress(Names{"a3", "a2b", "a1"}), "a[1,3],a2b");
  EXPECT_EQ(Compress(Names{"n10", "m2", "n9"}), "m2,n[9-10]");
}

TEST(HostlistCompressTest, LongDigitRunsStayText) {
  const Names names{"x1234567890123456789012", "x1234567890123456789013"};
  const std::string hostlist = Compress(names);
  EXPECT_EQ(hostlist, "x1234567890123456789012,x1234567890123456789013");
  EXPECT_EQ(MustExpand(hostlist), names);
  EXPECT_EQ(Compress(Names{"a999999999999999999", "a999999999999999998"}),
            "a[999999999999999998-999999999999999999]");
}

TEST(HostlistCompressTest, CanonicalHostlistsRoundTrip) {
  for (const std::string_view hostlist :
       {"a1", "login", "gpu[001-064]", "rack[1-2]-n[01-04]", "a[1,3,5-7]", "a1,b[2-3]", "a[0-10]",
        "a[00-10]", "n[1-2].ib", "a[1-2],a[01-02]", "r1-n[1-4],r2-n[1-2]", "a[1-2]b[1-3]c[1-2]",
        "gpu[00001-16384]", "a-[1-3]-b,a-[1-2]-c", "node[1,5,9-12,100]"}) {
    EXPECT_EQ(Compress(MustExpand(hostlist)), hostlist);
  }
}

TEST(HostlistCompressInOrderTest, KeepsTheOrderAndFoldsRuns) {
  using V = std::vector<std::string>;
  EXPECT_EQ(CompressInOrder(V{"gb001", "gb002", "gb003"}), "gb[001-003]");
  EXPECT_EQ(CompressInOrder(V{"gb019", "gb020", "gb001", "gb002"}), "gb[019-020],gb[001-002]");
  EXPECT_EQ(CompressInOrder(V{"n1", "n3", "n2", "n4"}), "n[1,3],n[2,4]");
  EXPECT_EQ(CompressInOrder(V{}), "");
  for (const V& names : {V{"b2", "a1", "a2", "b1"}, V{"x9", "x10", "x1"}, V{"z", "y", "x"}}) {
    const absl::StatusOr<std::vector<std::string>> back = Expand(CompressInOrder(names));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, names);
  }
}

TEST(HostlistCompressTest, LargeListsRoundTrip) {
  const Names names = MustExpand("gpu[00001-16384]");
  ASSERT_EQ(names.size(), 16384U);
  EXPECT_EQ(Compress(names), "gpu[00001-16384]");
  Names odd;
  for (std::size_t i = 0; i < names.size(); i += 2) odd.push_back(names[i]);
  EXPECT_EQ(MustExpand(Compress(odd)), odd);
}

// Random sets of names from a few prefixes, 1-3 numeric fields and mixed
// padding, sometimes whole products, with duplicates and in random order.
Names RandomNames(std::mt19937& rng) {
  static constexpr std::string_view kPrefixes[] = {"gpu", "rack", "n", "a-", "x.y"};
  static constexpr std::string_view kSeparators[] = {"-", "n", "-c", "_"};
  const auto pick = [&rng](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  Names names;
  const std::size_t shapes = 1 + pick(3);
  for (std::size_t shape = 0; shape < shapes; ++shape) {
    const std::string prefix(kPrefixes[pick(std::size(kPrefixes))]);
    const std::size_t fields = 1 + pick(3);
    std::vector<std::string> separators;
    for (std::size_t f = 1; f < fields; ++f) {
      separators.emplace_back(kSeparators[pick(std::size(kSeparators))]);
    }
    const std::string suffix = pick(3) == 0 ? ".ib" : "";
    const auto random_name = [&](const std::vector<int>& values) {
      std::string name = prefix;
      for (std::size_t f = 0; f < values.size(); ++f) {
        if (f > 0) name += separators[f - 1];
        name += ZeroPadded(values[f], pick(4));  // width 0 or 1: unpadded
      }
      return name + suffix;
    };
    if (pick(3) == 0) {
      // A whole product, written with one padding per field.
      std::vector<std::size_t> widths(fields);
      std::vector<int> sizes(fields);
      for (std::size_t f = 0; f < fields; ++f) {
        widths[f] = pick(4);
        sizes[f] = 1 + static_cast<int>(pick(5));
      }
      std::vector<int> values(fields, 0);
      while (true) {
        std::string name = prefix;
        for (std::size_t f = 0; f < fields; ++f) {
          if (f > 0) name += separators[f - 1];
          name += ZeroPadded(values[f] + 7, widths[f]);
        }
        names.push_back(name + suffix);
        std::size_t f = fields;
        while (f > 0 && ++values[f - 1] == sizes[f - 1]) values[--f] = 0;
        if (f == 0) break;
      }
    } else {
      const std::size_t count = pick(40);
      for (std::size_t i = 0; i < count; ++i) {
        std::vector<int> values(fields);
        for (int& value : values) value = static_cast<int>(pick(pick(2) == 0 ? 12 : 120));
        names.push_back(random_name(values));
      }
    }
  }
  if (!names.empty() && pick(2) == 0) names.push_back(names[pick(names.size())]);
  std::shuffle(names.begin(), names.end(), rng);
  return names;
}

TEST(HostlistPropertyTest, RandomSetsRoundTrip) {
  constexpr std::uint32_t kSeed = 20240611;
  std::mt19937 rng(kSeed);
  for (int iteration = 0; iteration < 1000; ++iteration) {
    const Names names = RandomNames(rng);
    const std::string hostlist = Compress(names);
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " iteration " + std::to_string(iteration) +
                 " hostlist " + hostlist);
    if (names.empty()) {
      EXPECT_EQ(hostlist, "");
      continue;
    }
    const absl::StatusOr<Names> expanded = Expand(hostlist);
    ASSERT_TRUE(expanded.ok()) << expanded.status();
    // Every distinct name exactly once.
    EXPECT_EQ(expanded->size(), SortedUnique(names).size());
    EXPECT_EQ(SortedUnique(*expanded), SortedUnique(names));
    // Canonical: compressing the expansion gives the same hostlist.
    EXPECT_EQ(Compress(*expanded), hostlist);
    if (testing::Test::HasFailure()) return;
  }
}

// Random strings over the syntax's characters: Expand either names a position
// inside the string (or just past it), or gives names that round-trip.
TEST(HostlistPropertyTest, RandomStringsFailCleanlyOrRoundTrip) {
  constexpr std::uint32_t kSeed = 7;
  constexpr std::string_view kAlphabet = "ab019[]-, ";
  std::mt19937 rng(kSeed);
  std::uniform_int_distribution<std::size_t> length(0, 12);
  std::uniform_int_distribution<std::size_t> letter(0, kAlphabet.size() - 1);
  int expanded_count = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string hostlist;
    for (std::size_t n = length(rng); n > 0; --n) hostlist.push_back(kAlphabet[letter(rng)]);
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " iteration " + std::to_string(iteration) +
                 " hostlist \"" + hostlist + "\"");
    const absl::StatusOr<Names> names = Expand(hostlist, 10'000);
    if (!names.ok()) {
      const std::string message(names.status().message());
      constexpr std::string_view kPosition = "\": position ";
      const std::size_t at = message.find(kPosition);
      ASSERT_NE(at, std::string::npos) << message;
      const std::size_t position = std::stoul(message.substr(at + kPosition.size()));
      EXPECT_GE(position, 1U) << message;
      EXPECT_LE(position, hostlist.size() + 1) << message;
      continue;
    }
    ++expanded_count;
    const absl::StatusOr<Names> again = Expand(Compress(*names));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(SortedUnique(*again), SortedUnique(*names));
    if (testing::Test::HasFailure()) return;
  }
  EXPECT_GT(expanded_count, 100);
}

}  // namespace
}  // namespace cohort::hostlist
