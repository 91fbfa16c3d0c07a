// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/io_frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::io {
namespace {

TEST(IoFrameTest, FramesComeBackWholeWhateverTheReadsCutThem) {
  const std::vector<Frame> sent = {
      {.kind = FrameKind::kHello, .rank = -1, .data = "k 1 0 node01 0 2"},
      {.kind = FrameKind::kStdout, .rank = 1, .data = "hello\n"},
      {.kind = FrameKind::kStderr, .rank = 70000, .data = std::string(5000, 'x')},
      {.kind = FrameKind::kStdinEnd, .rank = 0, .data = ""},
      {.kind = FrameKind::kDone, .rank = -1, .data = ""},
  };
  std::string bytes;
  for (const Frame& f : sent) bytes += EncodeFrame(f);
  // Every cut of the stream into two reads gives the same frames.
  for (std::size_t cut = 0; cut <= bytes.size(); cut += 7) {
    std::string buffer = bytes.substr(0, cut);
    std::vector<Frame> got;
    ASSERT_TRUE(DecodeFrames(buffer, got).ok());
    buffer += bytes.substr(cut);
    ASSERT_TRUE(DecodeFrames(buffer, got).ok());
    EXPECT_EQ(got, sent) << "cut at " << cut;
    EXPECT_TRUE(buffer.empty());
  }
}

TEST(IoFrameTest, AnUnknownKindOrAnOversizedFrameIsRefused) {
  std::string unknown = EncodeFrame({.kind = FrameKind::kStdout, .rank = 0, .data = "x"});
  unknown[0] = 12;
  std::vector<Frame> got;
  EXPECT_EQ(DecodeFrames(unknown, got).message(), "frame of unknown kind 12");
  std::string huge = EncodeFrame({.kind = FrameKind::kStdout, .rank = 0, .data = ""});
  huge[5] = 0x7F;  // a length of about 2 GiB
  EXPECT_FALSE(DecodeFrames(huge, got).ok());
  EXPECT_TRUE(got.empty());
}

TEST(IoFrameTest, HelloRoundTripsAndMalformedOnesAreRefused) {
  const Hello hello{
      .key = "0a1b", .job = 12, .step = 3, .node = "gpu001", .first_rank = 8, .ranks = 4};
  absl::StatusOr<Hello> back = ParseHello(EncodeHello(hello));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, hello);
  for (const std::string_view bad :
       {"", "k 1 0 n 0", "k x 0 n 0 1", "k 1 0 n -1 1", "k 1 0 n 0 1 extra", " 1 0 n 0 1"}) {
    EXPECT_FALSE(ParseHello(bad).ok()) << bad;
  }
}

TEST(IoFrameTest, FencePartsRoundTripWithBinaryDataAndBadHeadersAreRefused) {
  const FencePart part{.node_index = 1, .nodes = 4, .data = std::string("a\0\nb", 4)};
  absl::StatusOr<FencePart> back = ParseFencePart(EncodeFencePart(part));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, part);
  for (const std::string_view bad : {"", "1 4", "x 4\n", "4 4\n", "-1 4\n", "0 0\n", "1\n"}) {
    EXPECT_FALSE(ParseFencePart(bad).ok()) << bad;
  }
}

TEST(IoFrameTest, KeysCompareWhole) {
  EXPECT_TRUE(SameKey("abcd", "abcd"));
  EXPECT_FALSE(SameKey("abcd", "abce"));
  EXPECT_FALSE(SameKey("abcd", "abc"));
}

}  // namespace
}  // namespace cohort::io
