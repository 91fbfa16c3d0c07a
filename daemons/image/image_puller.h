// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/container/image_ref.h"
#include "manifest.h"

/// `cohort-image pull`: brings an image into the node's cache (image_cache.h)
/// and says where its root filesystem is and how to run it.
namespace cohort::image {

struct PullOptions {
  std::string cache_dir;         ///< the cache (created when missing)
  std::string ca_file;           ///< PEM bundle for the registry's TLS; empty: the system's
  std::string credentials_path;  ///< enroot's credentials file; empty: none
  /// Read the credentials file as this user (the job's owner); unset: as the
  /// process.
  std::optional<uid_t> credentials_uid;
  /// The job's owner: a squashfs file or OCI layout is opened as them (only
  /// what they may read is read); unset: as the process.
  std::optional<uid_t> owner;
  std::int64_t max_cache_bytes = 0;  ///< evict down to this after the pull; 0: no bound
  /// Mirrors by registry (HOST[:PORT] → base URLs), tried before it.
  std::map<std::string, std::vector<std::string>> mirrors;
  Platform platform;            ///< the entry to take from an index
  std::int64_t limit_rate = 0;  ///< bytes per second per download; 0: no cap
};

/// What a pull gives: where the image's root filesystem is and how its
/// config says to run it.
struct PulledImage {
  std::string reference;  ///< as the caller named it (canonical for registry images)
  std::string digest;     ///< the image manifest's (a squashfs file's own for those)
  std::string rootfs;     ///< absolute
  std::vector<std::string> env;
  std::string working_dir;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string user;
  std::int64_t bytes = 0;  ///< the disk space the root filesystem takes
  bool cached = false;     ///< it was already in the cache
};

/// The image as the one JSON object `cohort-image pull` prints.
[[nodiscard]] std::string PulledImageToJson(const PulledImage& image);

/// The reference as messages show it: REGISTRY#REPOSITORY:TAG, or the path.
[[nodiscard]] std::string DisplayReference(const container::ImageSource& source);

/// Pulls `source` into the cache, or finds it there, then evicts down to
/// max_cache_bytes. A registry image by tag is resolved at every call (one
/// manifest request); by digest it is found in the cache without the
/// network. Concurrent pulls of one reference, in any processes, share one
/// download (a lock per reference). Nothing is left in the cache on failure
/// but what the next call removes. Errors say what failed in the words of
/// the registry or the system and what to do: NotFound (no such image),
/// PermissionDenied / Unauthenticated (login refused or missing),
/// InvalidArgument (a digest mismatch, a malformed or oversized manifest or
/// layer, an unsafe layer entry), Unimplemented (unsupported media type),
/// Unavailable (network or disk). Blocks; single-threaded callers only
/// (layer extraction changes the working folder; reading credentials as
/// another user changes the process's identity for a moment).
[[nodiscard]] absl::StatusOr<PulledImage> PullImage(const container::ImageSource& source,
                                                    const PullOptions& options);

}  // namespace cohort::image
