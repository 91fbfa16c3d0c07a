// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// Running `cohort-image pull` (daemons/image): its command line and what
/// its failure says. The stepd pulls a step's image when it starts; the
/// agent pulls a pending job's image ahead of its start on the nodes
/// planned for it. Both pull the same way, so that the second finds what
/// the first left in the cache.
namespace cohort::step {

/// Where a node's images come from and where they are kept
/// (ContainerCacheDir= and its neighbours in cohort.conf).
struct ImageStore {
  std::string cache_dir;                      ///< the node's image cache (cohort-image --cache)
  std::int64_t cache_max_bytes = 0;           ///< 0: no bound
  std::string registry_ca_file;               ///< empty: the system's CAs
  std::string credentials_file;               ///< the node's logins, for owners without their own
  std::vector<std::string> registry_mirrors;  ///< REGISTRY=URL, tried before REGISTRY
};

/// The argv of `program` (cohort-image) pulling `reference` into `store`'s
/// cache for the job of `owner` (a uid): cohort-image uses the owner's own
/// registry logins when they keep enroot's `~/.config/enroot/.credentials`
/// (read as them), else the store's. Pure.
[[nodiscard]] std::vector<std::string> ImagePullCommand(const std::string& program,
                                                        const ImageStore& store,
                                                        const std::string& reference,
                                                        std::optional<std::uint32_t> owner);

/// The image as cohort-image described it.
struct ImageInfo {
  std::string digest;  ///< the manifest's
  std::string rootfs;  ///< its files in the node's cache
  std::vector<std::string> env;
  std::string working_dir;
  std::vector<std::string> entrypoint;
  bool cached = false;     ///< found in the cache: nothing was fetched
  std::int64_t bytes = 0;  ///< its disk space, unpacked
};

/// Parses what `cohort-image pull` prints. InvalidArgument for anything
/// else. Pure.
[[nodiscard]] absl::StatusOr<ImageInfo> ParseImageInfo(std::string_view json);

/// The last line of `text` that has something after trailing newlines
/// ("" for none), without its end of line: what a program's output says
/// last. Pure.
[[nodiscard]] std::string_view LastLine(std::string_view text);

/// What a failed `cohort-image pull` said: the last line it wrote to
/// stderr, without its "cohort-image: " prefix ("REF: why"), or how it
/// ended when it said nothing. Pure.
[[nodiscard]] std::string ImagePullComplaint(std::string_view stderr_text,
                                             std::string_view reference, int wait_status);

/// cohort-image next to the running program (the agent's and stepd's
/// folder), as installed.
[[nodiscard]] std::string ImageProgram();

}  // namespace cohort::step
