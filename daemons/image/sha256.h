// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <openssl/evp.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

/// SHA-256 as OCI digests write it (`sha256:<64 lowercase hex>`), streamed
/// through OpenSSL's EVP interface.
namespace cohort::image {

/// A running SHA-256. Not thread-safe; one per stream.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  /// Adds `data` to the hash.
  void Update(std::string_view data);
  /// The digest of everything added, as `sha256:<hex>`; call once.
  [[nodiscard]] std::string Finish();

 private:
  EVP_MD_CTX* context_;
};

/// The digest of `data`, as `sha256:<hex>`.
[[nodiscard]] std::string Sha256Digest(std::string_view data);

/// The digest of the file at `path`, read in 1 MiB blocks. Unavailable,
/// with strerror's words, when it cannot be read.
[[nodiscard]] absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

/// Whether `digest` is `sha256:` and 64 lowercase hex digits (safe to put
/// in a path).
[[nodiscard]] bool IsSha256Digest(std::string_view digest);

}  // namespace cohort::image
