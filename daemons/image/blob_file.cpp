// SPDX-License-Identifier: Apache-2.0
#include "blob_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"

namespace cohort::image {

BlobFile::BlobFile(UniqueFd fd, Descriptor blob, std::string_view kind)
    : fd_(std::move(fd)), blob_(std::move(blob)), kind_(kind), hash_(std::make_unique<Sha256>()) {}

absl::StatusOr<BlobFile> BlobFile::Create(const std::string& path, const Descriptor& blob,
                                          std::string_view kind) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    return absl::UnavailableError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  return BlobFile(std::move(fd), blob, kind);
}

bool BlobFile::Write(std::string_view data) {
  if (written_ + static_cast<std::int64_t>(data.size()) > blob_.size) {
    error_ = absl::InvalidArgumentError(fmt::format(
        "{} {} is longer than the {} bytes its manifest says", kind_, blob_.digest, blob_.size));
    return false;
  }
  hash_->Update(data);
  written_ += static_cast<std::int64_t>(data.size());
  while (!data.empty()) {
    const ssize_t put = ::write(fd_.get(), data.data(), data.size());
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      error_ = absl::UnavailableError(
          fmt::format("cannot write {} {}: {}", kind_, blob_.digest, std::strerror(errno)));
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(put));
  }
  return true;
}

absl::Status BlobFile::Finish() {
  if (!error_.ok()) return error_;
  if (written_ != blob_.size) {
    return absl::InvalidArgumentError(fmt::format("{} {} is {} bytes, not the {} its manifest says",
                                                  kind_, blob_.digest, written_, blob_.size));
  }
  const std::string got = hash_->Finish();
  if (got != blob_.digest) {
    return absl::InvalidArgumentError(
        fmt::format("{} {} does not match its digest (got {})", kind_, blob_.digest, got));
  }
  fd_.Reset();
  return absl::OkStatus();
}

}  // namespace cohort::image
