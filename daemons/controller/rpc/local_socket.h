// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "rpc/accept_loop.h"
#include "rpc/h2_guard.h"

namespace cohort::controller {

/// The controller's local Unix socket. Accepts connections itself so that it
/// can read each peer's uid (SO_PEERCRED), then hands the connection with
/// its uid to the HTTP/2 guard in front of the gRPC server. Owns one
/// accept loop.
class LocalSocket {
 public:
  LocalSocket() = default;
  LocalSocket(const LocalSocket&) = delete;
  LocalSocket& operator=(const LocalSocket&) = delete;
  ~LocalSocket();

  /// Binds `path` (a stale socket file is replaced), mode 0666: anyone may
  /// connect, and is known by uid. Unavailable when it cannot.
  [[nodiscard]] absl::Status Listen(const std::string& path);
  /// Starts accepting into `guard` (which must outlive Stop()).
  void Serve(H2Guard& guard);
  void Stop();
  /// Connections closed for want of a descriptor (AcceptLoop).
  [[nodiscard]] std::uint64_t Shed() const { return accepting_ ? accepting_->Shed() : 0; }

 private:
  int listen_fd_ = -1;
  std::string path_;
  std::unique_ptr<AcceptLoop> accepting_;
};

}  // namespace cohort::controller
