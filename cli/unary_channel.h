// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/socket.h>

#include <google/protobuf/message_lite.h>

#include "absl/status/status.h"
#include "hpack.h"

namespace cohort::cli {

/// gRPC unary calls over one HTTP/2 connection (RFC 9113, gRPC's
/// PROTOCOL-HTTP2), made on the caller's thread: no threads of its own, no
/// resolver, no plugins. A command makes one or two calls and exits, and
/// gRPC's C++ stack spends most of such a command starting up (its threads,
/// its channel); this is the same protocol on the wire, at a fraction of the
/// cost. It reaches Unix sockets and numeric addresses; host names need a
/// resolver and go through gRPC's stack (ControllerClient chooses).
///
/// The connection opens on the first call and is kept for the next ones;
/// calls are serialized. A call refused before the server began it (GOAWAY
/// below its stream, REFUSED_STREAM) is made once more on a new connection,
/// as gRPC does. Responses may be of any size: the receive windows are
/// opened to the maximum at once.
class UnaryChannel {
 public:
  using Metadata = std::vector<std::pair<std::string, std::string>>;
  using Deadline = std::chrono::system_clock::time_point;

  /// A channel to `target` when it is `unix:PATH` (`unix:///PATH` too) or an
  /// IPv4 or bracketed IPv6 address with a port; nullptr for anything else
  /// (a host name), and for a socket path too long for the system.
  [[nodiscard]] static std::unique_ptr<UnaryChannel> ForTarget(std::string_view target);

  UnaryChannel(const UnaryChannel&) = delete;
  UnaryChannel& operator=(const UnaryChannel&) = delete;
  ~UnaryChannel();

  /// Calls `method` ("/package.Service/Method") with `request` and fills
  /// `response`. The status is the server's gRPC status and message;
  /// UNAVAILABLE when the connection cannot be made or breaks, saying why;
  /// DEADLINE_EXCEEDED when `deadline` passes (the server is told it too, as
  /// grpc-timeout); INTERNAL for a response that breaks the protocol.
  [[nodiscard]] absl::Status Call(std::string_view method,
                                  const google::protobuf::MessageLite& request,
                                  google::protobuf::MessageLite& response, const Metadata& metadata,
                                  Deadline deadline);

 private:
  UnaryChannel(std::string authority, const sockaddr_storage& address, socklen_t address_length);

  struct Exchange;
  enum class Outcome { kDone, kRetry };

  absl::Status Connect(Deadline deadline);
  absl::Status Open(Deadline deadline);
  void Close();
  Outcome Run(Exchange& exchange);
  absl::Status Send(std::string_view bytes, Deadline deadline);
  absl::Status SendPending(Exchange& exchange);
  absl::Status ReadFrame(Deadline deadline);
  absl::Status HandleFrame(Exchange& exchange);
  absl::Status HandleSettings(Exchange& exchange, std::string_view payload);
  absl::Status FinishHeaders(Exchange& exchange);
  std::string Describe() const;

  std::mutex mutex_;
  std::string authority_;
  sockaddr_storage address_{};
  socklen_t address_length_ = 0;

  int fd_ = -1;
  std::uint32_t next_stream_ = 1;
  hpack::Decoder decoder_;
  std::int64_t connection_window_ = 0;  ///< what the server still accepts on the connection
  std::int64_t initial_stream_window_ = 0;
  std::uint32_t max_frame_size_ = 0;
  std::int64_t connection_received_ = 0;  ///< DATA bytes since the connection window was refilled
  bool going_away_ = false;               ///< the server sent GOAWAY: no new calls on it

  std::string input_;  ///< bytes read and not yet consumed
  std::size_t input_start_ = 0;
  std::uint8_t frame_type_ = 0;  ///< the frame ReadFrame returned
  std::uint8_t frame_flags_ = 0;
  std::uint32_t frame_stream_ = 0;
  std::string_view frame_payload_;
};

}  // namespace cohort::cli
