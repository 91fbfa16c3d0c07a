// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "unique_fd.h"

/// Walking and removing folder trees that other users may have shaped (an
/// image's root filesystem): by descriptor, never following a symlink, never
/// entering another filesystem mounted inside.
namespace cohort::image {

/// Removes `name` in the folder `dir_fd`, with everything under it. OK when
/// it does not exist. FailedPrecondition when a folder under it is another
/// filesystem's mount point (nothing of that filesystem is removed);
/// Unavailable with strerror's words when a removal fails.
[[nodiscard]] absl::Status RemoveTreeAt(int dir_fd, const std::string& name);

/// RemoveTreeAt for a path (its last component is not followed).
[[nodiscard]] absl::Status RemoveTree(const std::string& path);

/// The disk space the tree at `path` takes (st_blocks, hard links counted
/// once), without following symlinks or crossing filesystems. Unavailable
/// when it cannot be read.
[[nodiscard]] absl::StatusOr<std::int64_t> DiskUsage(const std::string& path);

/// Opens the folder `relative` (components separated by '/', no "..")
/// beneath the folder `root_fd`, refusing to pass through a symlink:
/// NotFound when a component does not exist, FailedPrecondition when one is
/// a symlink or not a folder.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenFolderBeneath(int root_fd, std::string_view relative);

/// The whole file at `path`, at most `limit` bytes: NotFound when it cannot
/// be opened, InvalidArgument when it is longer, Unavailable when a read
/// fails, each with the path and strerror's words.
[[nodiscard]] absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                                        std::int64_t limit);

}  // namespace cohort::image
