// SPDX-License-Identifier: Apache-2.0
// The HTTP/2 guard's reading of a connection's frames (h2_frame_watch.cpp):
// frames split anywhere across reads, and each bound of FrameBounds passed
// the way a hostile client passes it.
#include "rpc/h2_frame_watch.h"

#include <string>

#include <gtest/gtest.h>

namespace cohort::controller {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::size_t length) {
  std::string out;
  out += static_cast<char>((length >> 16) & 0xff);
  out += static_cast<char>((length >> 8) & 0xff);
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(type);
  out += static_cast<char>(flags);
  out += static_cast<char>((stream >> 24) & 0x7f);
  out += static_cast<char>((stream >> 16) & 0xff);
  out += static_cast<char>((stream >> 8) & 0xff);
  out += static_cast<char>(stream & 0xff);
  out.append(length, 'x');
  return out;
}

constexpr std::uint8_t kHeaders = 1;
constexpr std::uint8_t kRst = 3;
constexpr std::uint8_t kSettings = 4;
constexpr std::uint8_t kPing = 6;
constexpr std::uint8_t kContinuation = 9;
constexpr std::uint8_t kEndStream = 1;
constexpr std::uint8_t kEndHeaders = 4;

TEST(FrameWatchTest, AnOrdinaryConnectionPassesWhateverItsReadsAre) {
  FrameWatch watch;
  std::string client(kPreface);
  client += Frame(kSettings, 0, 0, 12);
  for (std::uint32_t stream = 1; stream < 400; stream += 2) {
    client += Frame(kHeaders, kEndHeaders, stream, 200) + Frame(0, kEndStream, stream, 500);
  }
  // One byte at a time, then in one piece: the same.
  for (std::size_t i = 0; i < client.size(); ++i) {
    ASSERT_EQ(watch.FromClient(client.substr(i, 1), milliseconds(0)), "") << i;
    if (i % 709 == 0) {
      // The server answers each stream as it goes.
      for (std::uint32_t s = 1; s < 400; s += 2)
        watch.FromServer(Frame(kHeaders, kEndHeaders | kEndStream, s, 10));
    }
  }
  FrameWatch whole;
  EXPECT_EQ(whole.FromClient(client, milliseconds(0)), "");
  EXPECT_EQ(whole.OpenStreams(), 200U);
  std::string answers;
  for (std::uint32_t s = 1; s < 400; s += 2)
    answers += Frame(kHeaders, kEndHeaders | kEndStream, s, 10);
  whole.FromServer(answers.substr(0, 7));
  EXPECT_FALSE(whole.ServerAtFrameEnd());
  whole.FromServer(answers.substr(7));
  EXPECT_TRUE(whole.ServerAtFrameEnd());
  EXPECT_EQ(whole.OpenStreams(), 0U);
}

// CVE-2023-33953: a header block without end.
TEST(FrameWatchTest, AHeaderBlockWithoutEndIsRefused) {
  FrameWatch watch;
  std::string client(kPreface);
  client += Frame(kHeaders, 0, 1, 16000);
  EXPECT_EQ(watch.FromClient(client, milliseconds(0)), "");
  std::string why;
  for (int i = 0; i < 10 && why.empty(); ++i) {
    why = watch.FromClient(Frame(kContinuation, 0, 1, 16000), milliseconds(0));
  }
  EXPECT_EQ(why, "a header block of more than 65536 bytes");
  // Once refused, always refused.
  EXPECT_EQ(watch.FromClient(Frame(kSettings, 0, 0, 0), milliseconds(0)), why);

  FrameWatch other;
  EXPECT_EQ(
      other.FromClient(std::string(kPreface) + Frame(kHeaders, 0, 1, 10) + Frame(kPing, 0, 0, 8),
                       milliseconds(0)),
      "a frame inside a header block");
}

// CVE-2023-44487: streams opened and reset at once, without end.
TEST(FrameWatchTest, RapidResetIsRefusedAndTheWindowForgets) {
  FrameBounds bounds;
  bounds.resets_per_window = 100;
  FrameWatch watch(bounds);
  std::string client(kPreface);
  for (std::uint32_t stream = 1; stream <= 199; stream += 2) {
    client += Frame(kHeaders, kEndHeaders, stream, 50) + Frame(kRst, 0, stream, 4);
  }
  EXPECT_EQ(watch.FromClient(client, milliseconds(0)), "");
  EXPECT_EQ(watch.OpenStreams(), 0U);
  // A new window: a hundred more are fine.
  std::string later;
  for (std::uint32_t stream = 201; stream <= 399; stream += 2) {
    later += Frame(kHeaders, kEndHeaders, stream, 50) + Frame(kRst, 0, stream, 4);
  }
  EXPECT_EQ(watch.FromClient(later, milliseconds(10'000)), "");
  EXPECT_EQ(watch.FromClient(Frame(kHeaders, kEndHeaders, 401, 50) + Frame(kRst, 0, 401, 4),
                             milliseconds(10'001)),
            "more than 100 streams reset in 10 s (rapid reset)");
}

TEST(FrameWatchTest, StreamsLeftOpenAndControlFloodsAreRefused) {
  FrameBounds bounds;
  bounds.open_streams = 10;
  bounds.control_per_window = 5;
  FrameWatch open(bounds);
  std::string client(kPreface);
  for (std::uint32_t stream = 1; stream <= 21; stream += 2) {
    client += Frame(kHeaders, kEndHeaders | kEndStream, stream, 20);
  }
  EXPECT_EQ(open.FromClient(client, milliseconds(0)), "11 streams open (at most 10)");

  FrameWatch pings(bounds);
  std::string flood(kPreface);
  for (int i = 0; i < 6; ++i) flood += Frame(kPing, 0, 0, 8);
  EXPECT_EQ(pings.FromClient(flood, milliseconds(0)), "more than 5 control frames in 10 s");

  FrameWatch big;
  EXPECT_EQ(big.FromClient(std::string(kPreface) + Frame(0, 0, 1, 0).replace(0, 3, "\xff\xff\xff"),
                           milliseconds(0)),
            "a frame of 16777215 bytes (at most 4194304)");
}

}  // namespace
}  // namespace cohort::controller
