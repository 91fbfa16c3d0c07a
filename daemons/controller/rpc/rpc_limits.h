// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include <grpcpp/server_builder.h>

/// The bounds gRPC itself holds the controller's connections to, behind
/// the HTTP/2 guard (h2_guard.h), which holds them to tighter ones first
/// (docs/operations.md, "Resource bounds"); the handshake timeout serves a
/// standby's port, which gRPC listens on itself. What a client sees at
/// each: past the streams of a connection, its new calls wait in its own
/// HTTP/2 queue; past the header bytes, the call is refused
/// RESOURCE_EXHAUSTED; past the message bytes, RESOURCE_EXHAUSTED; a
/// connection that has not finished its TLS handshake in time, or has had
/// no call for the idle time, is closed; past the memory of all
/// connections together, gRPC reads less and refuses new calls until
/// memory is given back.
namespace cohort::controller {

inline constexpr int kMaxStreamsPerConnection = 256;
inline constexpr int kMaxHeaderBytes = 16 * 1024;
inline constexpr int kHandshakeTimeoutMs = 10'000;
inline constexpr int kIdleConnectionMs = 5 * 60 * 1000;
inline constexpr std::int64_t kRpcMemoryBytes = std::int64_t{512} << 20;

/// Sets the bounds above, and the message bound (request_bounds.h), on
/// `builder`; also the ping policy agents need (they ping every 10 s).
void LimitRpcServer(grpc::ServerBuilder& builder);

}  // namespace cohort::controller
