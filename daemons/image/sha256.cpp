// SPDX-License-Identifier: Apache-2.0
#include "sha256.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"

namespace cohort::image {

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  // Only allocation can fail here; without a context nothing can be hashed.
  if (context_ == nullptr || EVP_DigestInit_ex(context_, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

void Sha256::Update(std::string_view data) { EVP_DigestUpdate(context_, data.data(), data.size()); }

std::string Sha256::Finish() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> hash{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_, hash.data(), &length);
  std::string digest = "sha256:";
  for (unsigned int i = 0; i < length; ++i) digest += fmt::format("{:02x}", hash[i]);
  return digest;
}

std::string Sha256Digest(std::string_view data) {
  Sha256 hash;
  hash.Update(data);
  return hash.Finish();
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      return absl::UnavailableError(fmt::format("cannot read {}: {}", path, std::strerror(error)));
    }
    if (got == 0) break;
    hash.Update(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
  }
  ::close(fd);
  return hash.Finish();
}

bool IsSha256Digest(std::string_view digest) {
  if (!digest.starts_with("sha256:") || digest.size() != 7 + 64) return false;
  for (const char c : digest.substr(7)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace cohort::image
