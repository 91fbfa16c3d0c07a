// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "blob_source.h"

namespace cohort::image {

/// An OCI image layout folder (`oci-layout`, `index.json`,
/// `blobs/sha256/<hex>`) as a source of manifests and blobs. Every blob read
/// is checked against its digest. Not thread-safe.
class OciLayout final : public BlobSource {
 public:
  /// Opens the layout at `folder`. FailedPrecondition when it has no
  /// `oci-layout` or `index.json` (it is not a layout).
  [[nodiscard]] static absl::StatusOr<OciLayout> Open(const std::string& folder);

  /// Empty `reference`: the layout's index.json. A digest: that blob.
  [[nodiscard]] absl::StatusOr<FetchedManifest> FetchManifest(std::string_view reference) override;
  [[nodiscard]] absl::Status FetchBlob(const Descriptor& blob, std::string_view kind,
                                       const std::string& path) override;

 private:
  explicit OciLayout(std::string folder) : folder_(std::move(folder)) {}

  std::string folder_;
};

}  // namespace cohort::image
