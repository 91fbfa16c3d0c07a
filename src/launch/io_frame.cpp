// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/io_frame.h"

#include <fmt/format.h>

#include <charconv>

namespace cohort::io {
namespace {

void PutUint32(std::string& out, std::uint32_t value) {
  for (const int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((value >> shift) & 0xFF));
}

std::uint32_t GetUint32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

bool KnownKind(std::uint8_t kind) {
  return kind >= static_cast<std::uint8_t>(FrameKind::kHello) &&
         kind <= static_cast<std::uint8_t>(FrameKind::kAnswer);
}

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::uint32_t MaxFrameData(FrameKind kind) {
  return kind == FrameKind::kFencePart || kind == FrameKind::kFenceDone ||
                 kind == FrameKind::kAnswer
             ? kMaxFenceData
             : kMaxFrameData;
}

std::string EncodeFrame(const Frame& frame) {
  std::string out;
  out.reserve(kFrameHeaderSize + frame.data.size());
  out.push_back(static_cast<char>(frame.kind));
  PutUint32(out, static_cast<std::uint32_t>(frame.rank));
  PutUint32(out, static_cast<std::uint32_t>(frame.data.size()));
  out += frame.data;
  return out;
}

absl::Status DecodeFrames(std::string& buffer, std::vector<Frame>& out) {
  std::size_t pos = 0;
  while (buffer.size() - pos >= kFrameHeaderSize) {
    const std::string_view header(buffer.data() + pos, kFrameHeaderSize);
    const auto kind = static_cast<std::uint8_t>(header[0]);
    const std::uint32_t length = GetUint32(header.substr(5));
    if (!KnownKind(kind)) {
      return absl::InvalidArgumentError(fmt::format("frame of unknown kind {}", kind));
    }
    const std::uint32_t most = MaxFrameData(static_cast<FrameKind>(kind));
    if (length > most) {
      return absl::InvalidArgumentError(
          fmt::format("frame of {} bytes; frames of its kind carry at most {}", length, most));
    }
    if (buffer.size() - pos - kFrameHeaderSize < length) break;
    out.push_back(Frame{.kind = static_cast<FrameKind>(kind),
                        .rank = static_cast<std::int32_t>(GetUint32(header.substr(1))),
                        .data = buffer.substr(pos + kFrameHeaderSize, length)});
    pos += kFrameHeaderSize + length;
  }
  buffer.erase(0, pos);
  return absl::OkStatus();
}

std::string EncodeHello(const Hello& hello) {
  return fmt::format("{} {} {} {} {} {}", hello.key, hello.job, hello.step, hello.node,
                     hello.first_rank, hello.ranks);
}

absl::StatusOr<Hello> ParseHello(std::string_view text) {
  std::vector<std::string_view> words;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    words.push_back(text.substr(0, space));
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  Hello hello;
  if (words.size() != 6 || words[0].empty() || words[3].empty() ||
      !ParseNumber(words[1], hello.job) || !ParseNumber(words[2], hello.step) ||
      !ParseNumber(words[4], hello.first_rank) || !ParseNumber(words[5], hello.ranks) ||
      hello.first_rank < 0 || hello.ranks < 0) {
    return absl::InvalidArgumentError(
        "hello: expected \"KEY JOB STEP NODE FIRST_RANK RANKS\" from cohort-stepd");
  }
  hello.key = std::string(words[0]);
  hello.node = std::string(words[3]);
  return hello;
}

std::string EncodeFenceDone(const absl::StatusOr<std::string>& all) {
  return all.ok() ? "0" + *all : "1" + std::string(all.status().message());
}

absl::StatusOr<std::string> ParseFenceDone(std::string_view text) {
  if (text.starts_with('0')) return std::string(text.substr(1));
  if (text.starts_with('1')) return absl::AbortedError(std::string(text.substr(1)));
  return absl::InvalidArgumentError("fence done: neither \"0\" and data nor \"1\" and why");
}

std::string EncodeFencePart(const FencePart& part) {
  return fmt::format("{} {}\n", part.node_index, part.nodes) + part.data;
}

absl::StatusOr<FencePart> ParseFencePart(std::string_view text) {
  const std::size_t newline = text.find('\n');
  const std::string_view head = text.substr(0, newline);
  const std::size_t space = head.find(' ');
  FencePart part;
  if (newline == std::string_view::npos || space == std::string_view::npos ||
      !ParseNumber(head.substr(0, space), part.node_index) ||
      !ParseNumber(head.substr(space + 1), part.nodes) || part.nodes < 1 || part.node_index < 0 ||
      part.node_index >= part.nodes) {
    return absl::InvalidArgumentError(
        "fence part: expected \"INDEX NODES\\n\" and the data from cohort-stepd");
  }
  part.data = std::string(text.substr(newline + 1));
  return part;
}

bool SameKey(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return differ == 0;
}

}  // namespace cohort::io
