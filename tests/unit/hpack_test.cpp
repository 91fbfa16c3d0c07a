// SPDX-License-Identifier: Apache-2.0
// The CLI's HPACK decoder against the examples of RFC 7541 Appendix C.
#include "hpack.h"

#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::cli::hpack {
namespace {

// "8286 8441" -> the octets, as the RFC prints them.
std::string Hex(std::string_view text) {
  std::string out;
  int high = -1;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) continue;
    const int digit = std::isdigit(static_cast<unsigned char>(c)) != 0 ? c - '0' : c - 'a' + 10;
    if (high < 0) {
      high = digit;
    } else {
      out.push_back(static_cast<char>(high * 16 + digit));
      high = -1;
    }
  }
  return out;
}

std::vector<Field> DecodeOk(Decoder& decoder, std::string_view hex) {
  std::vector<Field> fields;
  const absl::Status status = decoder.Decode(Hex(hex), fields);
  EXPECT_TRUE(status.ok()) << status;
  return fields;
}

TEST(HpackTest, HuffmanStringsOfTheRfcExamples) {
  const std::vector<std::pair<std::string, std::string>> examples = {
      {"f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"},
      {"a8eb 1064 9cbf", "no-cache"},
      {"25a8 49e9 5ba9 7d7f", "custom-key"},
      {"25a8 49e9 5bb8 e8b4 bf", "custom-value"},
      {"6402", "302"},
      {"aec3 771a 4b", "private"},
      {"d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff", "Mon, 21 Oct 2013 20:13:21 GMT"},
      {"9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3", "https://www.example.com"},
      {"9bd9 ab", "gzip"},
      {"94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 "
       "03ed 4ee5 b106 3d50 07",
       "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
      {"", ""},
  };
  for (const auto& [coded, text] : examples) {
    absl::StatusOr<std::string> decoded = DecodeHuffman(Hex(coded));
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status();
    EXPECT_EQ(*decoded, text);
  }
}

TEST(HpackTest, HuffmanRejectsBadPaddingAndTheEndOfStringCode) {
  // '0' is 00000: three 0 bits of padding are not the end-of-string code.
  EXPECT_FALSE(DecodeHuffman(Hex("00")).ok());
  // Eight or more bits of padding.
  EXPECT_FALSE(DecodeHuffman(Hex("07ff")).ok());
  // The 30-bit end-of-string code itself.
  EXPECT_FALSE(DecodeHuffman(Hex("ffff fffc")).ok());
  // '0' with five 1 bits of padding is fine.
  EXPECT_EQ(DecodeHuffman(Hex("07")).value_or("?"), "0");
}

TEST(HpackTest, LiteralFieldsOfAppendixC2) {
  Decoder decoder;
  // C.2.1: with indexing, a new name.
  EXPECT_EQ(DecodeOk(decoder, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
            (std::vector<Field>{{"custom-key", "custom-header"}}));
  EXPECT_EQ(decoder.TableSize(), 55U);
  // C.2.2: without indexing, an indexed name.
  EXPECT_EQ(DecodeOk(decoder, "040c 2f73 616d 706c 652f 7061 7468"),
            (std::vector<Field>{{":path", "/sample/path"}}));
  // C.2.3: never indexed.
  EXPECT_EQ(DecodeOk(decoder, "1008 7061 7373 776f 7264 0673 6563 7265 74"),
            (std::vector<Field>{{"password", "secret"}}));
  // C.2.4: indexed, from the static table.
  EXPECT_EQ(DecodeOk(decoder, "82"), (std::vector<Field>{{":method", "GET"}}));
  EXPECT_EQ(decoder.TableSize(), 55U);
}

TEST(HpackTest, RequestsWithHuffmanCodingOfAppendixC4ShareTheDynamicTable) {
  Decoder decoder;
  EXPECT_EQ(DecodeOk(decoder, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
            (std::vector<Field>{{":method", "GET"},
                                {":scheme", "http"},
                                {":path", "/"},
                                {":authority", "www.example.com"}}));
  EXPECT_EQ(decoder.TableSize(), 57U);
  EXPECT_EQ(DecodeOk(decoder, "8286 84be 5886 a8eb 1064 9cbf"),
            (std::vector<Field>{{":method", "GET"},
                                {":scheme", "http"},
                                {":path", "/"},
                                {":authority", "www.example.com"},
                                {"cache-control", "no-cache"}}));
  EXPECT_EQ(decoder.TableSize(), 110U);
  EXPECT_EQ(DecodeOk(decoder, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
            (std::vector<Field>{{":method", "GET"},
                                {":scheme", "https"},
                                {":path", "/index.html"},
                                {":authority", "www.example.com"},
                                {"custom-key", "custom-value"}}));
  EXPECT_EQ(decoder.TableSize(), 164U);
}

TEST(HpackTest, ResponsesOfAppendixC6EvictFromASmallTable) {
  Decoder decoder(256);
  // A table size update to 256 is what the RFC's encoder would have sent
  // first; the examples assume it.
  EXPECT_EQ(DecodeOk(decoder,
                     "3fe1 01 4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 "
                     "0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
            (std::vector<Field>{{":status", "302"},
                                {"cache-control", "private"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"location", "https://www.example.com"}}));
  EXPECT_EQ(decoder.TableSize(), 222U);
  EXPECT_EQ(DecodeOk(decoder, "4883 640e ffc1 c0bf"),
            (std::vector<Field>{{":status", "307"},
                                {"cache-control", "private"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"location", "https://www.example.com"}}));
  EXPECT_EQ(decoder.TableSize(), 222U);
  EXPECT_EQ(DecodeOk(decoder,
                     "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b "
                     "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 "
                     "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07"),
            (std::vector<Field>{
                {":status", "200"},
                {"cache-control", "private"},
                {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                {"location", "https://www.example.com"},
                {"content-encoding", "gzip"},
                {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}}));
  EXPECT_EQ(decoder.TableSize(), 215U);
}

TEST(HpackTest, AppendLiteralIsReadBack) {
  std::string block;
  AppendLiteral(block, ":path", "/cohort.v1.Controller/SubmitJob");
  const std::string long_value(300, 'k');  // a length that needs a second octet
  AppendLiteral(block, "cohort-auth-key", long_value);
  Decoder decoder;
  std::vector<Field> fields;
  ASSERT_TRUE(decoder.Decode(block, fields).ok());
  EXPECT_EQ(fields, (std::vector<Field>{{":path", "/cohort.v1.Controller/SubmitJob"},
                                        {"cohort-auth-key", long_value}}));
  EXPECT_EQ(decoder.TableSize(), 0U);
}

TEST(HpackTest, MalformedBlocksAreRefusedWithTheReason) {
  const auto refused = [](std::string_view hex, std::string_view reason) {
    Decoder decoder;
    std::vector<Field> fields;
    const absl::Status status = decoder.Decode(Hex(hex), fields);
    EXPECT_FALSE(status.ok()) << hex;
    EXPECT_NE(std::string(status.message()).find(reason), std::string::npos) << status;
  };
  refused("80", "index 0");                     // index 0 is no entry
  refused("be", "index 62");                    // the dynamic table is empty
  refused("400a 6375 73", "ends inside");       // a string cut short
  refused("7f", "ends inside an integer");      // an integer cut short
  refused("3fe2 1f", "over the 4096 allowed");  // a size update over the limit
  refused("82 20", "after a field");            // a size update after a field
  refused("ffff ffff ff0f", "too large");       // an integer beyond any block
}

}  // namespace
}  // namespace cohort::cli::hpack
