// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rpc/accept_loop.h"
#include "rpc/h2_guard.h"

namespace cohort::controller {

/// The controller's TCP port. The controller binds and accepts it itself
/// (AcceptLoop: out of descriptors it sheds connections and goes on) and
/// hands each connection, with TCP_NODELAY as gRPC's own get, to the
/// HTTP/2 guard in front of the gRPC server.
class TcpListener {
 public:
  /// Binds `host`:`port` (a name or an address; empty, "0.0.0.0" or "::":
  /// every address; port 0: any free one) and listens. Unavailable, naming
  /// the address and the error, when it cannot.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TcpListener>> Listen(const std::string& host,
                                                                           int port);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  /// Starts accepting into `guard` (which must outlive Stop()).
  void Serve(H2Guard& guard);
  /// Stops accepting and closes the port; connections already handed on
  /// are the guard's. Idempotent.
  void Stop();

  [[nodiscard]] int Port() const { return port_; }
  /// Connections closed for want of a descriptor (AcceptLoop).
  [[nodiscard]] std::uint64_t Shed() const { return accepting_ ? accepting_->Shed() : 0; }

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  /// Listen, on addresses of `family` (AF_UNSPEC: any the name has).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TcpListener>> ListenOn(
      const std::string& host, int port, int family);

  int fd_ = -1;
  int port_ = 0;
  std::unique_ptr<AcceptLoop> accepting_;
};

}  // namespace cohort::controller
