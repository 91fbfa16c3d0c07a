// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "store/pg_leader.h"

namespace cohort::controller {

/// Where a standby listens, and what it writes for those who start it.
struct StandbyPlace {
  std::string address;      ///< HOST:PORT to listen on (port 0: any)
  std::string socket_path;  ///< StateDir/cohort.sock
  std::string port_file;    ///< --port-file; empty: none
  std::shared_ptr<grpc::ServerCredentials> credentials;
  /// The HOST:PORT clients are sent to, once the port is known.
  std::function<std::string(int port)> advertise;
};

/// How a standby's wait ended.
struct StandbyEnd {
  enum class Why : std::uint8_t {
    kAcquired,  ///< this controller holds the lease now, with epoch leadership.Epoch()
    kStopped,   ///< SIGINT or SIGTERM
    kReload,    ///< SIGHUP: execute again to read cohort.conf afresh
  };
  Why why = Why::kStopped;
  int port = 0;  ///< the TCP port it listened on: the active controller takes the same
};

/// Runs a standby controller (StateBackend=postgresql) until it takes the
/// lease or a signal ends it: listens on `place` (TCP and the local
/// socket) and answers every call of every service UNAVAILABLE, "not the
/// active controller; the active one is HOST:PORT", so that the CLI and
/// agents follow the redirect; tries the lease ten times a second. Its
/// ports are closed when it returns. Unavailable when it cannot listen.
[[nodiscard]] absl::StatusOr<StandbyEnd> RunStandby(const StandbyPlace& place,
                                                    Leadership& leadership);

}  // namespace cohort::controller
