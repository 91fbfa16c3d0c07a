// SPDX-License-Identifier: Apache-2.0
#include "oci_layout.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "blob_file.h"
#include "file_tree.h"
#include "sha256.h"
#include "unique_fd.h"

namespace cohort::image {
absl::StatusOr<OciLayout> OciLayout::Open(const std::string& folder) {
  for (const char* name : {"oci-layout", "index.json"}) {
    struct stat info {};
    if (::stat(fmt::format("{}/{}", folder, name).c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
      return absl::FailedPreconditionError(fmt::format(
          "{} is not an OCI image layout (it has no {}); give a layout folder or a tar of one",
          folder, name));
    }
  }
  return OciLayout(folder);
}

absl::StatusOr<FetchedManifest> OciLayout::FetchManifest(std::string_view reference) {
  const bool index = reference.empty();
  if (!index && !IsSha256Digest(reference)) {
    return absl::InvalidArgumentError(
        fmt::format("an OCI layout's manifests are named by sha256 digest, not \"{}\"", reference));
  }
  const std::string path = index ? folder_ + "/index.json"
                                 : fmt::format("{}/blobs/sha256/{}", folder_, reference.substr(7));
  absl::StatusOr<std::string> body = ReadSmallFile(path, kMaxManifestBytes);
  if (!body.ok()) return body.status();
  FetchedManifest fetched{.media_type = index ? std::string(kOciIndex) : std::string(),
                          .body = *std::move(body),
                          .digest = {}};
  fetched.digest = Sha256Digest(fetched.body);
  if (!index && fetched.digest != reference) {
    return absl::InvalidArgumentError(
        fmt::format("manifest {} does not match its digest (got {})", reference, fetched.digest));
  }
  return fetched;
}

absl::Status OciLayout::FetchBlob(const Descriptor& blob, std::string_view kind,
                                  const std::string& path) {
  const std::string source = fmt::format("{}/blobs/sha256/{}", folder_, blob.digest.substr(7));
  UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) {
    return absl::NotFoundError(fmt::format("the layout has no {} {} ({}: {})", kind, blob.digest,
                                           source, std::strerror(errno)));
  }
  absl::StatusOr<BlobFile> file = BlobFile::Create(path, blob, kind);
  if (!file.ok()) return file.status();
  std::array<char, 1 << 16> buffer{};
  while (true) {
    const ssize_t got = ::read(in.get(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::UnavailableError(
          fmt::format("cannot read {}: {}", source, std::strerror(errno)));
    }
    if (got == 0) break;
    if (!file->Write(std::string_view(buffer.data(), static_cast<std::size_t>(got)))) {
      return file->error();
    }
  }
  return file->Finish();
}

}  // namespace cohort::image
