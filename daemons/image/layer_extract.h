// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

/// Applying an image's layers to a root filesystem (libarchive): tar
/// archives, gzip- or zstd-compressed or plain, with OCI whiteouts.
namespace cohort::image {

/// OK for the layer media types this program extracts (OCI's tar, tar+gzip
/// and tar+zstd, Docker's rootfs.diff.tar.gzip); Unimplemented
/// ("unsupported media type ...") for others, such as foreign
/// (nondistributable) layers.
[[nodiscard]] absl::Status CheckLayerMediaType(std::string_view media_type);

/// Extracts the layer archive at `layer_path` (called `name`, its digest,
/// in messages) onto the folder `rootfs`, over
/// the layers applied before it:
/// - `DIR/.wh.NAME` removes DIR/NAME of earlier layers, and
///   `DIR/.wh..wh..opq` empties DIR of earlier layers' entries (this
///   layer's stay); neither is written itself;
/// - an entry replaces what earlier layers had at its path (a folder over a
///   folder merges);
/// - owners (numeric ids), permissions, times, extended attributes, hard
///   links and symlinks are kept.
/// Entries with an absolute path or a ".." component, hard links to such
/// paths, and entries or whiteouts whose path passes through a symlink are
/// refused (FailedPrecondition naming the entry): nothing is ever written
/// outside `rootfs`. InvalidArgument when the archive is not a readable tar
/// or unpacks to more than `max_bytes`; Unavailable when writing fails. On
/// error, `rootfs` is left half-built: the caller discards it. Changes the
/// process's working folder during the call (libarchive writes relative to
/// it): single-threaded callers only.
[[nodiscard]] absl::Status ExtractLayer(const std::string& layer_path, std::string_view name,
                                        const std::string& rootfs, std::int64_t max_bytes);

}  // namespace cohort::image
