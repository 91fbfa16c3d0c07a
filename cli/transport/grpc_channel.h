// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/socket.h>

#include <google/protobuf/message_lite.h>

#include "absl/status/status.h"
#include "tls_session.h"
#include "transport/grpc_call.h"
#include "transport/http2_session.h"
#include "transport/resolver.h"

namespace cohort::cli {

/// Ends a call in progress from another thread: the call returns CANCELLED
/// at once, whatever it was waiting for. One per call; any thread.
class CallCanceller {
 public:
  CallCanceller();
  CallCanceller(const CallCanceller&) = delete;
  CallCanceller& operator=(const CallCanceller&) = delete;
  ~CallCanceller();

  void Cancel();
  [[nodiscard]] bool Cancelled() const { return cancelled_.load(); }
  /// Readable once cancelled (an eventfd), to poll beside the call's socket.
  [[nodiscard]] int Fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::atomic<bool> cancelled_{false};
};

/// gRPC calls over one HTTP/2 connection (RFC 9113 by libnghttp2; gRPC's
/// PROTOCOL-HTTP2 by GrpcCall), made on the caller's thread: no threads of
/// its own, no plugins. A command
/// makes one or two calls and exits, and gRPC's C++ stack would spend most
/// of such a command starting up (its threads, its channel, the static
/// initialisers of gRPC, OpenSSL and the full protobuf runtime); this is the
/// same protocol on the wire, at a fraction of the cost. Unary calls and
/// server streams (`cohort run` follows its job on one); no compression (the
/// controller serves none); TLS over TCP when the cluster has it
/// (tls::TlsSession: OpenSSL, the controller's certificate verified).
///
/// The target is `unix:PATH` (`unix:///PATH` too), or HOST:PORT where HOST
/// is an IPv4 address, a bracketed IPv6 one, or a name resolved when the
/// connection opens (ResolveHost: /etc/hosts, then DNS; each address is
/// tried in turn). The connection opens on the first call and is kept for
/// the next ones; calls are serialized. A call refused before the server
/// began it (GOAWAY below its stream, REFUSED_STREAM) is made once more on
/// a new connection, as gRPC does. The receive windows are opened to the
/// maximum at once; a header block over 256 KiB or a message over 256 MiB
/// fails the call.
class GrpcChannel {
 public:
  using Metadata = std::vector<std::pair<std::string, std::string>>;
  using Deadline = std::chrono::system_clock::time_point;
  /// Takes one message of a stream, serialized; false ends the call.
  using MessageSink = std::function<bool(std::string_view message)>;

  /// TLS on a TCP connection (never on a Unix socket): on when the
  /// cluster's controller serves it (TLSCertFile), verified with `ca_file`.
  struct Tls {
    bool on = false;
    std::string ca_file;  ///< TLSCAFile; empty: the system's CAs
  };

  /// A channel to `target`; nullptr when it is none of the forms above, or a
  /// socket path too long for the system.
  [[nodiscard]] static std::unique_ptr<GrpcChannel> ForTarget(std::string_view target,
                                                              const Tls& tls);
  [[nodiscard]] static std::unique_ptr<GrpcChannel> ForTarget(std::string_view target) {
    return ForTarget(target, Tls());
  }

  /// Bounds the TCP handshake of each connection this channel opens: one
  /// not made within `limit` fails UNAVAILABLE, as unsent, so that a caller
  /// with another server to ask moves on (a live host's kernel answers a
  /// connection within a round trip, busy server or not; a host cut off
  /// answers nothing, or only after its address fails to resolve on the
  /// link, 3 s). Zero, the default: the call's deadline alone.
  void LimitConnect(std::chrono::milliseconds limit) { connect_limit_ = limit; }

  GrpcChannel(const GrpcChannel&) = delete;
  GrpcChannel& operator=(const GrpcChannel&) = delete;
  ~GrpcChannel();

  /// Calls `method` ("/package.Service/Method") with `request` and fills
  /// `response`. The status is the server's gRPC status and message;
  /// UNAVAILABLE when the connection cannot be made or breaks, saying why;
  /// DEADLINE_EXCEEDED when `deadline` passes (the server is told it too, as
  /// grpc-timeout); INTERNAL for a response that breaks the protocol.
  [[nodiscard]] absl::Status Call(std::string_view method,
                                  const google::protobuf::MessageLite& request,
                                  google::protobuf::MessageLite& response, const Metadata& metadata,
                                  Deadline deadline);

  /// Calls the server-streaming `method` with `request` and hands each
  /// message of the answer to `sink` as it comes, with no deadline. Returns
  /// the server's status when it ends the stream, CANCELLED when `canceller`
  /// is cancelled or `sink` returns false (the connection is then closed),
  /// and otherwise as Call.
  [[nodiscard]] absl::Status ServerStream(std::string_view method,
                                          const google::protobuf::MessageLite& request,
                                          const Metadata& metadata, const MessageSink& sink,
                                          const CallCanceller& canceller);

 private:
  GrpcChannel(std::string authority, std::vector<Endpoint> endpoints, std::string host,
              std::uint16_t port);

  static std::unique_ptr<GrpcChannel> ForTargetPlain(std::string_view target);
  /// What one read or write of the connection did (plain, or through TLS).
  using Step = tls::TlsSession::Step;
  Step WriteSome(std::string_view bytes);
  Step ReadSome(char* into, std::size_t size);
  absl::Status StartTls(Deadline deadline);

  /// How one attempt of a call ended: done (with the call's status, or
  /// the connection's failure), or to be made again; and whether the
  /// connection may carry another call.
  enum class Outcome : std::uint8_t { kDone, kRetry };
  struct Attempt {
    Outcome outcome = Outcome::kDone;
    bool drop_connection = false;
  };

  absl::Status Perform(std::string_view method, const google::protobuf::MessageLite& request,
                       const Metadata& metadata, Deadline deadline, const MessageSink& sink,
                       const CallCanceller* canceller);
  Attempt Run(GrpcCall& call, const Http2Session::Headers& headers, Deadline deadline);
  absl::Status Connect(const Endpoint& endpoint, Deadline deadline);
  absl::Status Open(Deadline deadline);
  void Close();
  absl::Status Wait(short events, Deadline deadline) const;
  absl::Status Send(std::string_view bytes, Deadline deadline);
  absl::Status Flush(Deadline deadline);
  absl::Status Receive(Deadline deadline);
  std::string Describe() const;

  std::chrono::milliseconds connect_limit_{0};  ///< see LimitConnect
  std::mutex mutex_;
  std::string authority_;
  std::vector<Endpoint> endpoints_;  ///< empty: `host_` is resolved on each Open
  std::string host_;
  std::uint16_t port_ = 0;
  Tls tls_;
  std::string tls_host_;  ///< what the certificate must name: the host part of the target
  const CallCanceller* canceller_ = nullptr;  ///< of the call in progress, if any

  int fd_ = -1;
  std::unique_ptr<tls::TlsSession> session_;  ///< the connection's TLS, when on
  std::unique_ptr<Http2Session> http2_;       ///< the connection's HTTP/2 state
  /// Room for one read, never filled first: a page is touched only when a
  /// read writes to it (zeroing 256 KiB cost a command 64 page faults).
  std::unique_ptr<char[]> input_;
  absl::Status call_failure_;  ///< the connection failed the call in progress
};

/// Whether a failed call never reached a server: the connection could not
/// be made (UNAVAILABLE), so the call may be made to another controller.
[[nodiscard]] bool NeverSent(const absl::Status& status);
/// The payload that marks such a status.
inline constexpr const char* kUnsentPayload = "cohort.cli/unsent";

}  // namespace cohort::cli
