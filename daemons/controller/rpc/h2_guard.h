// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/server.h>

#include "rpc/h2_frame_watch.h"
#include "rpc/peer_book.h"
#include "tls_session.h"

namespace cohort::controller {

/// Stands between the controller's listeners (the TCP port and the local
/// socket) and gRPC: gRPC 1.51 cannot be told to bound what an HTTP/2
/// client makes it hold (a header block without end, streams opened and
/// reset without end), so the guard ends the TCP port's TLS (when it has
/// it), follows the frames both ways (FrameWatch), and hands gRPC the plain
/// HTTP/2 over a socket pair, whose peer it writes to the PeerBook (a local
/// uid; a TCP client's address and the names of a client certificate the
/// handshake verified). A client past a bound, or whose handshake takes
/// over 10 s, is disconnected, and its address (its uid, locally) may not
/// connect for 10 s. At 4,096 connections open, or 64 from one address or
/// uid, a new one takes the place of the oldest idle one (no stream open,
/// or no handshake done), and is closed at once when none is idle. After a client was
/// disconnected for a bound, the memory gRPC freed is given back to the
/// system (malloc_trim), once a second at most.
///
/// One thread (epoll) carries every connection; it copies bytes, never
/// parses a message, and stops reading a side whose other side is 256 KiB
/// behind.
class H2Guard {
 public:
  /// `tls` null: the port is plain TCP. The server must outlive Stop().
  H2Guard(grpc::Server* server, PeerBook& peers, std::shared_ptr<tls::TlsServerContext> tls);
  ~H2Guard();
  H2Guard(const H2Guard&) = delete;
  H2Guard& operator=(const H2Guard&) = delete;

  /// Takes a client's connection (non-blocking) and who it is: a local
  /// uid, or a TCP client's address (TLS is ended here when the port has
  /// it). Any thread.
  void Add(int fd, Peer peer);
  /// Closes every connection and joins the thread. Idempotent.
  void Stop();

  /// Connections closed for passing a bound, since the start. Any thread.
  [[nodiscard]] std::uint64_t Refused() const { return refused_; }

  struct Connection;

 private:
  void Run();
  void Adopt(int fd, Peer peer);
  /// Which side of a connection epoll said is ready: only that side is
  /// read (a read of the other would only say EAGAIN).
  enum class Woke : std::uint8_t { kClient, kInner, kBoth };
  void Pump(Connection& c, Woke woke);
  void Close(int client_fd, const std::string& why);
  /// `c` passed a bound: logged, its source penalized, then Tell.
  void Refuse(Connection& c, const std::string& why);
  /// Ends gRPC's side of `c` and tells the client why (GOAWAY), then
  /// lingers until it closes.
  void Tell(Connection& c, const std::string& why);
  void Linger(Connection& c);
  /// Writes what gRPC said to the client, as far as its socket takes it
  /// (a TLS wait noted in the connection); false when the client is gone.
  [[nodiscard]] bool FlushDown(Connection& c);
  void Watch(Connection& c);

  grpc::Server* server_;
  PeerBook& peers_;
  std::shared_ptr<tls::TlsServerContext> tls_;
  int epoll_ = -1;
  int wake_ = -1;  ///< eventfd: Add and Stop
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> refused_{0};
  /// Connections handed in by Add, not yet adopted by the thread.
  std::mutex mutex_;
  std::vector<std::pair<int, Peer>> incoming_;
  /// The thread's: connections by client descriptor, and the gRPC side's
  /// descriptors pointing to them.
  std::map<int, std::unique_ptr<Connection>> connections_;
  std::map<int, int> inner_to_client_;
  /// Open connections, and until when new ones are refused, by address
  /// (or "uid N").
  std::map<std::string, int> per_source_;
  std::map<std::string, std::chrono::milliseconds> penalized_;
  std::chrono::milliseconds trimmed_{0};
  bool trim_due_ = false;
};

}  // namespace cohort::controller
