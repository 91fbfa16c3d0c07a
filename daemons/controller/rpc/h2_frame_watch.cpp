// SPDX-License-Identifier: Apache-2.0
#include "rpc/h2_frame_watch.h"

#include <fmt/format.h>

namespace cohort::controller {
namespace {

constexpr std::uint8_t kData = 0x0;
constexpr std::uint8_t kHeaders = 0x1;
constexpr std::uint8_t kRstStream = 0x3;
constexpr std::uint8_t kWindowUpdate = 0x8;
constexpr std::uint8_t kContinuation = 0x9;
constexpr std::uint8_t kEndStream = 0x1;
constexpr std::uint8_t kEndHeaders = 0x4;
constexpr std::size_t kFrameHeader = 9;

}  // namespace

template <typename OnFrame>
void FrameWatch::Scan(Reader& reader, std::string_view bytes, OnFrame on_frame) {
  while (!bytes.empty()) {
    if (reader.skip > 0) {
      const std::size_t passed = std::min(reader.skip, bytes.size());
      reader.skip -= passed;
      bytes.remove_prefix(passed);
      continue;
    }
    const std::size_t wanted = kFrameHeader - reader.header.size();
    reader.header.append(bytes.substr(0, wanted));
    bytes.remove_prefix(std::min(wanted, bytes.size()));
    if (reader.header.size() < kFrameHeader) return;
    const auto byte = [&](std::size_t i) {
      return static_cast<std::uint32_t>(static_cast<unsigned char>(reader.header[i]));
    };
    Frame frame;
    frame.length = byte(0) << 16 | byte(1) << 8 | byte(2);
    frame.type = static_cast<std::uint8_t>(byte(3));
    frame.flags = static_cast<std::uint8_t>(byte(4));
    frame.stream = (byte(5) << 24 | byte(6) << 16 | byte(7) << 8 | byte(8)) & 0x7fffffffU;
    reader.header.clear();
    reader.skip = frame.length;
    on_frame(frame);
  }
}

bool FrameWatch::Count(std::size_t& count, std::size_t most, std::chrono::milliseconds now) {
  if (now - window_start_ >= bounds_.window) {
    window_start_ = now;
    opened_ = resets_ = control_ = 0;
  }
  return ++count <= most;
}

std::string FrameWatch::Client(const Frame& frame, std::chrono::milliseconds now) {
  if (frame.length > bounds_.frame_bytes) {
    return fmt::format("a frame of {} bytes (at most {})", frame.length, bounds_.frame_bytes);
  }
  if (in_header_block_ && frame.type != kContinuation) {
    return "a frame inside a header block";  // RFC 9113 §6.10: a protocol error
  }
  switch (frame.type) {
    case kHeaders:
      header_block_ = frame.length;
      in_header_block_ = (frame.flags & kEndHeaders) == 0;
      if (frame.stream > last_opened_ && frame.stream % 2 == 1) {
        last_opened_ = frame.stream;
        open_.insert(frame.stream);
        if (open_.size() > bounds_.open_streams) {
          return fmt::format("{} streams open (at most {})", open_.size(), bounds_.open_streams);
        }
        if (!Count(opened_, bounds_.opened_per_window, now)) {
          return fmt::format("more than {} streams opened in {} s", bounds_.opened_per_window,
                             bounds_.window.count() / 1000);
        }
      }
      break;
    case kContinuation:
      if (!in_header_block_) return "a CONTINUATION frame outside a header block";
      header_block_ += frame.length;
      in_header_block_ = (frame.flags & kEndHeaders) == 0;
      break;
    case kRstStream:
      open_.erase(frame.stream);
      if (!Count(resets_, bounds_.resets_per_window, now)) {
        return fmt::format("more than {} streams reset in {} s (rapid reset)",
                           bounds_.resets_per_window, bounds_.window.count() / 1000);
      }
      break;
    case kData:
    case kWindowUpdate:
      break;
    default:  // PING, SETTINGS, PRIORITY, GOAWAY, PUSH_PROMISE, unknown types
      if (!Count(control_, bounds_.control_per_window, now)) {
        return fmt::format("more than {} control frames in {} s", bounds_.control_per_window,
                           bounds_.window.count() / 1000);
      }
  }
  if (header_block_ > bounds_.header_block_bytes) {
    return fmt::format("a header block of more than {} bytes", bounds_.header_block_bytes);
  }
  return {};
}

std::string FrameWatch::FromClient(std::string_view bytes, std::chrono::milliseconds now) {
  if (!verdict_.empty()) return verdict_;
  Scan(client_, bytes, [&](const Frame& frame) {
    if (verdict_.empty()) verdict_ = Client(frame, now);
  });
  return verdict_;
}

void FrameWatch::FromServer(std::string_view bytes) {
  Scan(server_, bytes, [&](const Frame& frame) {
    ++server_frames_;
    if (frame.type == kRstStream ||
        ((frame.type == kHeaders || frame.type == kData) && (frame.flags & kEndStream) != 0)) {
      open_.erase(frame.stream);
    }
  });
}

}  // namespace cohort::controller
