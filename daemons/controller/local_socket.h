// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/status.h"
#include "accept_loop.h"

namespace cohort::controller {

/// The controller's local Unix socket. Accepts connections itself so that it
/// can read each peer's uid (SO_PEERCRED), then hands the connection to the
/// gRPC server, whose calls name it as peer "fd:N". Owns one accept loop.
class LocalSocket {
 public:
  LocalSocket() = default;
  LocalSocket(const LocalSocket&) = delete;
  LocalSocket& operator=(const LocalSocket&) = delete;
  ~LocalSocket();

  /// Binds `path` (a stale socket file is replaced), mode 0666: anyone may
  /// connect, and is known by uid. Unavailable when it cannot.
  [[nodiscard]] absl::Status Listen(const std::string& path);
  /// Starts accepting into `server` (which must outlive Stop()).
  void Serve(grpc::Server* server);
  void Stop();
  /// Connections closed for want of a descriptor (AcceptLoop).
  [[nodiscard]] std::uint64_t Shed() const { return accepting_ ? accepting_->Shed() : 0; }

  /// The uid of the peer of a call whose grpc peer string is `peer`; nullopt
  /// for calls that did not come through this socket. Any thread.
  [[nodiscard]] std::optional<std::uint32_t> PeerUid(const std::string& peer) const;

 private:
  int listen_fd_ = -1;
  std::string path_;
  std::unique_ptr<AcceptLoop> accepting_;
  mutable std::mutex mutex_;  ///< guards only the connection table below
  std::map<std::string, std::uint32_t> peers_;
};

}  // namespace cohort::controller
