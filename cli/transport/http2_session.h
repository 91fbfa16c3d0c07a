// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

using nghttp2_session = struct nghttp2_session;

namespace cohort::cli {

struct Http2StreamState;

/// One stream's side of a request: the body it sends and what it hears.
/// Each callback may fail the connection by returning an error (a protocol
/// breach, or more than the caller takes), which Http2Session::Feed returns.
class Http2Stream {
 public:
  /// Which header block of the response a header belongs to.
  enum class Block : std::uint8_t { kHeaders, kTrailers };

  virtual ~Http2Stream() = default;
  /// The request body; sent as the server's windows allow, then END_STREAM.
  [[nodiscard]] virtual std::string_view Body() const = 0;
  virtual absl::Status OnHeader(Block block, std::string_view name, std::string_view value) = 0;
  /// A whole header block; `ends_stream`: the response ends with it.
  virtual absl::Status OnHeaderBlock(Block block, bool ends_stream) = 0;
  virtual absl::Status OnData(std::string_view data) = 0;
  /// The stream ended: `error_code` 0 after END_STREAM, else the HTTP/2
  /// error code of a RST_STREAM (REFUSED_STREAM for a stream the server's
  /// GOAWAY left unbegun).
  virtual void OnClose(std::uint32_t error_code) = 0;
};

/// The HTTP/2 client side of one connection (RFC 9113), framing, HPACK
/// and flow control by libnghttp2, with no I/O of its own: the caller
/// writes what Output() gives and hands Feed() what it reads. The
/// connection announces no server push and the largest windows, so that a
/// server never waits on this client while it sends a large answer. Not
/// thread-safe.
class Http2Session {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  /// A session whose preface and settings are the first Output().
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Http2Session>> Client();
  ~Http2Session();
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  /// Opens a stream with `headers` (pseudo-headers first) whose events go
  /// to `stream`, which must outlive it. Its id, or the error.
  [[nodiscard]] absl::StatusOr<std::int32_t> Request(const Headers& headers, Http2Stream& stream);
  /// Resets a stream this side no longer wants (CANCEL).
  void Reset(std::int32_t stream);
  /// The bytes to write now, all of them; empty when there is nothing.
  [[nodiscard]] absl::StatusOr<std::string> Output();
  /// Takes bytes read from the server. An error names the breach.
  [[nodiscard]] absl::Status Feed(std::string_view bytes);
  /// OK while the connection goes on; once nghttp2 ended it (a breach it
  /// answered with GOAWAY, sent by Output()), the breach as an error.
  [[nodiscard]] absl::Status Ended() const;
  /// The server sent GOAWAY: no new stream goes on this connection.
  [[nodiscard]] bool GoingAway() const { return going_away_; }
  /// Why, when the server's GOAWAY carried an error and said why in its
  /// debug data (the controller's guard says which bound was passed).
  [[nodiscard]] const std::string& GoingAwayWhy() const { return going_away_why_; }
  /// Whether `stream` is still open on this side: its Http2Stream is still
  /// referred to (a server that answered before reading the whole request).
  [[nodiscard]] bool StreamOpen(std::int32_t stream) const { return streams_.contains(stream); }

 private:
  Http2Session();
  friend struct Http2Callbacks;

  nghttp2_session* session_ = nullptr;
  /// Each open stream's state, which nghttp2's callbacks reach by id.
  std::unordered_map<std::int32_t, std::unique_ptr<Http2StreamState>> streams_;
  bool going_away_ = false;
  std::string going_away_why_;
  absl::Status failure_;    ///< what a callback failed with, for Feed to return
  std::string error_text_;  ///< nghttp2's own account of a breach
  std::optional<std::uint8_t> last_frame_type_;  ///< of the frame received last
};

}  // namespace cohort::cli
