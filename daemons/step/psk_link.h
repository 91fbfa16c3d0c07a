// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tls_session.h"

/// The links a cohort-stepd dials for a step: to its `cohort run` (the
/// step's I/O stream) and to the stepd above it in the step's fence tree.
/// Both are TCP inside TLS keyed by the step's key (TlsSession::StartPsk),
/// so that only a peer the controller told the key is heard.
namespace cohort::step {

/// A TCP connection to HOST:PORT within `wait`: a non-blocking socket, or
/// Unavailable with the reason alone (the caller says what it dialled).
[[nodiscard]] absl::StatusOr<int> DialTcp(const std::string& address,
                                          std::chrono::milliseconds wait);

/// A TCP connection to HOST:PORT begun and not waited for: a non-blocking
/// socket whose connect may be in progress (poll it for POLLOUT; a TLS
/// handshake on it then goes on, or fails with the connect's error).
/// Unavailable with the reason when it cannot even begin.
[[nodiscard]] absl::StatusOr<int> BeginTcp(const std::string& address);

/// The client end of TLS keyed by `key_hex` on the non-blocking socket
/// `fd`, its handshake done within `wait`; Unavailable with the reason.
[[nodiscard]] absl::StatusOr<std::unique_ptr<tls::TlsSession>> SecureWithKey(
    int fd, std::string_view key_hex, std::chrono::milliseconds wait);

/// The address of this host that `fd`'s connection left from, as "HOST"
/// (IPv6 in brackets): one the peer's network reaches. Empty when unknown.
[[nodiscard]] std::string LocalHost(int fd);

}  // namespace cohort::step
