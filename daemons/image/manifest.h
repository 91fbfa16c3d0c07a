// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// OCI and Docker (schema 2) image manifests, indexes and configs: parsing,
/// bounds, and choosing a platform's manifest from an index. Pure.
namespace cohort::image {

inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kDockerList =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kDockerManifest =
    "application/vnd.docker.distribution.manifest.v2+json";
/// What a manifest request accepts, as an Accept header.
inline constexpr std::string_view kManifestAccept =
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

/// The largest manifest, index or config read.
inline constexpr std::int64_t kMaxManifestBytes = 4 << 20;
/// The most layers an image may have.
inline constexpr int kMaxLayers = 256;

/// An OS and CPU as OCI names them (linux, amd64, arm64 + variant v8).
struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;  ///< empty: any
};

/// A content descriptor.
struct Descriptor {
  std::string media_type;
  std::string digest;  ///< sha256:<hex>, checked
  std::int64_t size = 0;
  Platform platform;  ///< index entries only
};

/// An index or list's entries, or an image manifest's config and layers.
struct Manifest {
  bool is_index = false;
  std::vector<Descriptor> manifests;  ///< is_index
  Descriptor config;                  ///< !is_index
  std::vector<Descriptor> layers;     ///< !is_index, base layer first
};

/// What the container runs with, from the image config.
struct ImageConfig {
  Platform platform;
  std::vector<std::string> env;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
  int diff_ids = 0;  ///< how many rootfs.diff_ids it lists
};

/// Parses a manifest or index. `media_type` is the server's Content-Type;
/// when empty or generic the document's own mediaType decides. Checks every
/// descriptor (sha256 digests, sizes within bounds, at most kMaxLayers
/// layers, each layer at most `max_layer_bytes`). InvalidArgument for
/// malformed JSON or bounds; Unimplemented ("unsupported media type ...")
/// for a media type other than the four above, such as Docker schema 1.
[[nodiscard]] absl::StatusOr<Manifest> ParseManifest(std::string_view media_type,
                                                     std::string_view body,
                                                     std::int64_t max_layer_bytes);

/// Parses an image config (OCI's or Docker's). InvalidArgument when
/// malformed.
[[nodiscard]] absl::StatusOr<ImageConfig> ParseImageConfig(std::string_view body);

/// Whether an image manifest's config media type is an image config's.
[[nodiscard]] bool IsImageConfigType(std::string_view media_type);

/// Parses `OS/ARCH[/VARIANT]`. InvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<Platform> ParsePlatform(std::string_view text);

/// `OS/ARCH[/VARIANT]`.
[[nodiscard]] std::string FormatPlatform(const Platform& platform);

/// The OCI architecture of a uname machine name (x86_64 → amd64, aarch64 →
/// arm64, ...; others unchanged), with linux as the OS.
[[nodiscard]] Platform LinuxPlatform(std::string_view machine);

/// The index entry for `platform`: same OS and architecture, and the same
/// variant when `platform` names one. NotFound listing the platforms the
/// index has otherwise.
[[nodiscard]] absl::StatusOr<Descriptor> ChoosePlatform(const Manifest& index,
                                                        const Platform& platform);

}  // namespace cohort::image
