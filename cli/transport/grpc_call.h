// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "transport/http2_session.h"

namespace cohort::cli {

/// One gRPC call on an HTTP/2 stream, as gRPC's PROTOCOL-HTTP2 says: the
/// request's headers and its length-prefixed message; the answer's
/// headers, each message handed to a sink as it completes, and the status
/// of its trailers (or of a trailers-only answer, or of an HTTP status that
/// is not gRPC's). Bounded: a message over 256 MiB fails the call.
class GrpcCall final : public Http2Stream {
 public:
  using Metadata = std::vector<std::pair<std::string, std::string>>;
  using Deadline = std::chrono::system_clock::time_point;
  /// Takes one message, serialized; false abandons the call.
  using Sink = std::function<bool(std::string_view message)>;

  /// A call sending `message` (serialized) whose answers go to `sink`.
  GrpcCall(std::string_view message, const Sink& sink);

  /// The request headers of a call of `method` ("/package.Service/Method")
  /// on `authority`; grpc-timeout from `deadline` unless it is max().
  [[nodiscard]] static Http2Session::Headers RequestHeaders(std::string_view method,
                                                            std::string_view scheme,
                                                            std::string_view authority,
                                                            Deadline deadline,
                                                            const Metadata& metadata);

  [[nodiscard]] bool Finished() const { return finished_; }
  /// The server never began the call (REFUSED_STREAM, or above a GOAWAY's
  /// last stream) and took none of it: it may be made again.
  [[nodiscard]] bool Refused() const { return refused_; }
  /// The sink stopped the call: the server may still be sending.
  [[nodiscard]] bool Abandoned() const { return abandoned_; }
  [[nodiscard]] std::size_t Messages() const { return messages_; }
  /// The call's outcome once Finished(): the server's gRPC status, or
  /// what broke the protocol.
  [[nodiscard]] absl::Status Status() const;

  // Http2Stream:
  [[nodiscard]] std::string_view Body() const override { return body_; }
  absl::Status OnHeader(Block block, std::string_view name, std::string_view value) override;
  absl::Status OnHeaderBlock(Block block, bool ends_stream) override;
  absl::Status OnData(std::string_view data) override;
  void OnClose(std::uint32_t error_code) override;

 private:
  void Finish(absl::Status status);

  std::string body_;  ///< the framed request message
  const Sink& sink_;
  std::vector<std::pair<std::string, std::string>> fields_;  ///< of the block being received
  bool headers_seen_ = false;
  std::string pending_;  ///< DATA that is not a whole message yet
  std::size_t messages_ = 0;
  bool finished_ = false;
  bool refused_ = false;
  bool abandoned_ = false;
  absl::Status status_;
};

}  // namespace cohort::cli
