// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "manifest.h"

namespace cohort::image {

/// A manifest or index as fetched: its bytes, their media type and digest.
struct FetchedManifest {
  std::string media_type;  ///< the server's Content-Type (empty: unknown)
  std::string body;        ///< at most kMaxManifestBytes
  std::string digest;      ///< sha256 of body
};

/// Where an image's manifests and blobs come from: a registry
/// (RegistryClient) or an OCI image layout on disk (OciLayout). Used from
/// one thread.
class BlobSource {
 public:
  virtual ~BlobSource() = default;

  /// The manifest or index `reference` names: a tag or a digest (verified
  /// against the body); empty for a layout's own index. Errors name the
  /// cause in the source's words and say what to do.
  [[nodiscard]] virtual absl::StatusOr<FetchedManifest> FetchManifest(
      std::string_view reference) = 0;

  /// Writes the blob `blob` (a `kind`: "config" or "layer", for messages)
  /// into the new file `path`, checking its size and SHA-256 as it streams;
  /// on a mismatch the error says "KIND DIGEST does not match its digest
  /// (got ...)". The caller removes `path` on error.
  [[nodiscard]] virtual absl::Status FetchBlob(const Descriptor& blob, std::string_view kind,
                                               const std::string& path) = 0;
};

}  // namespace cohort::image
