// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

namespace cohort::controller {

/// The bounds the HTTP/2 guard holds a client's connection to, below
/// what gRPC 1.51 holds it to by itself (it buffers a header block without
/// end, CVE-2023-33953, and pays for every stream opened and reset,
/// CVE-2023-44487). Past any of them the connection is closed.
struct FrameBounds {
  /// The bytes of one header block, its HEADERS and CONTINUATION frames
  /// together (gRPC's own bound on metadata is 16 KiB, uncompressed).
  std::size_t header_block_bytes = 64 * 1024;
  /// Streams the client opened that the server has not ended (gRPC refuses
  /// any past its 256).
  std::size_t open_streams = 1024;
  /// Streams opened, resets sent, and pings, settings and other control
  /// frames sent, in any window of `window`.
  std::size_t opened_per_window = 20'000;
  std::size_t resets_per_window = 1'000;
  std::size_t control_per_window = 2'000;
  std::chrono::milliseconds window{10'000};
  /// One frame's payload (gRPC's frames are at most 4 MiB).
  std::size_t frame_bytes = 4 << 20;
};

/// Follows the frames of one HTTP/2 connection, both ways, by their 9-byte
/// headers (RFC 9113 §4.1) and never their payloads, and says when the
/// client passes a bound. Pure: the caller feeds bytes as they pass, with
/// the time.
class FrameWatch {
 public:
  explicit FrameWatch(FrameBounds bounds = {}) : bounds_(bounds) {}

  /// Bytes from the client (its preface first). Returns why the
  /// connection must close, or empty while it is within its bounds; once
  /// it returned a reason it keeps returning it.
  [[nodiscard]] std::string FromClient(std::string_view bytes, std::chrono::milliseconds now);
  /// Bytes from the server: streams it ends, or resets, are no longer open.
  void FromServer(std::string_view bytes);

  [[nodiscard]] std::size_t OpenStreams() const { return open_.size(); }
  /// Whether the server's bytes so far end at a frame's end, and whether
  /// they held a frame at all (its SETTINGS come first): where a frame of
  /// the guard's own (GOAWAY) may follow them.
  [[nodiscard]] bool ServerAtFrameEnd() const {
    return server_.skip == 0 && server_.header.empty();
  }
  [[nodiscard]] bool ServerSpoke() const { return server_frames_ > 0; }

 private:
  /// One direction's position in the frame stream.
  struct Reader {
    std::size_t skip = 0;      ///< preface bytes, then payload bytes, still to pass
    std::string header;        ///< a frame header read in part
    std::uint32_t length = 0;  ///< of the frame whose payload is being skipped
  };
  struct Frame {
    std::uint32_t length = 0;
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::uint32_t stream = 0;
  };
  template <typename OnFrame>
  void Scan(Reader& reader, std::string_view bytes, OnFrame on_frame);
  [[nodiscard]] std::string Client(const Frame& frame, std::chrono::milliseconds now);
  /// Counts one event in a window; true while within `most`.
  bool Count(std::size_t& count, std::size_t most, std::chrono::milliseconds now);

  FrameBounds bounds_;
  Reader client_{.skip = 24, .header = {}, .length = 0};  // the preface, "PRI * HTTP/2.0..."
  Reader server_;
  std::string verdict_;
  bool in_header_block_ = false;
  std::size_t header_block_ = 0;
  std::uint32_t last_opened_ = 0;
  std::unordered_set<std::uint32_t> open_;
  std::size_t server_frames_ = 0;
  std::chrono::milliseconds window_start_{0};
  std::size_t opened_ = 0;
  std::size_t resets_ = 0;
  std::size_t control_ = 0;
};

}  // namespace cohort::controller
