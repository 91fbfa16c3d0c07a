// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

/// MUNGE credentials (libmunge), the way Slurm proves who a caller is: the
/// local munged seals the caller's uid and gid with the cluster's MUNGE key;
/// any munged of the cluster unseals them, refusing a credential that is
/// forged, expired (older than its TTL, 300 s by default) or already
/// decoded once (munged's replay cache). Each call opens munged's socket:
/// thread-safe, a fraction of a millisecond.
namespace cohort::shell {

/// What a credential says it is for, sealed in it as its payload, so that
/// one made for another purpose is refused: a user's call, or an agent's
/// registration of the node named after the prefix.
inline constexpr std::string_view kMungeClientPayload = "cohort-client";
inline constexpr std::string_view kMungeAgentPayloadPrefix = "cohort-agent ";

/// A credential for the calling process's uid and gid carrying `payload`,
/// from the munged at `socket` (empty: libmunge's default,
/// /run/munge/munge.socket.2). Unavailable, saying how to start munged or
/// point at it, when munged does not answer.
[[nodiscard]] absl::StatusOr<std::string> EncodeMungeCredential(const std::string& socket,
                                                                std::string_view payload);

/// What a decoded credential says.
struct MungeIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string payload;
};

/// Decodes `credential` with the munged at `socket`. Unauthenticated
/// naming the reason (invalid, expired, replayed, made with another key),
/// or Unavailable when munged does not answer.
[[nodiscard]] absl::StatusOr<MungeIdentity> DecodeMungeCredential(const std::string& socket,
                                                                  std::string_view credential);

/// The socket as people read it: `socket`, or libmunge's default path.
[[nodiscard]] std::string MungeSocketName(const std::string& socket);

}  // namespace cohort::shell
