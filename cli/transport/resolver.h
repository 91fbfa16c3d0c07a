// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::cli {

/// One address a host name stands for, ready for connect().
struct Endpoint {
  sockaddr_storage address{};
  socklen_t length = 0;
};

/// The addresses of `host` (a name, or an IPv4 or IPv6 address without
/// brackets) with `port`, in the order to try them, as c-ares finds them:
/// /etc/hosts, then the DNS servers of /etc/resolv.conf. `cohort` is a
/// static program, which must not load the C library's NSS modules (see
/// cmake/StaticClients.cmake); c-ares reads those files itself, as gRPC's
/// resolver does. UNAVAILABLE, naming the host and why, when the name is
/// unknown or no server answers; DEADLINE_EXCEEDED when `deadline` passes.
[[nodiscard]] absl::StatusOr<std::vector<Endpoint>> ResolveHost(
    const std::string& host, std::uint16_t port, std::chrono::system_clock::time_point deadline);

}  // namespace cohort::cli
