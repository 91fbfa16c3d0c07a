// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "manifest.h"
#include "sha256.h"
#include "unique_fd.h"

namespace cohort::image {

/// A blob being written to a file: counts and hashes the bytes as they come
/// and stops at the size its descriptor declares. Used from one thread.
class BlobFile {
 public:
  /// Creates (truncating) `path`, mode 0600, for `blob` (`kind`: "config" or
  /// "layer", for messages). Unavailable when it cannot be created.
  [[nodiscard]] static absl::StatusOr<BlobFile> Create(const std::string& path,
                                                       const Descriptor& blob,
                                                       std::string_view kind);

  /// Appends `data`. False, with error() set, when it would pass the declared
  /// size or the write fails: the transfer must stop.
  bool Write(std::string_view data);
  /// Why Write returned false.
  [[nodiscard]] const absl::Status& error() const { return error_; }

  /// After the last byte: InvalidArgument when the size or digest differs
  /// from the descriptor's ("layer sha256:ab.. does not match its digest
  /// (got sha256:cd..)"); Unavailable when the file cannot be flushed.
  [[nodiscard]] absl::Status Finish();

 private:
  BlobFile(UniqueFd fd, Descriptor blob, std::string_view kind);

  UniqueFd fd_;
  Descriptor blob_;
  std::string kind_;
  std::unique_ptr<Sha256> hash_;
  std::int64_t written_ = 0;
  absl::Status error_;
};

}  // namespace cohort::image
