// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

/// Container image references as users write them (`srun --container-image=`):
/// enroot's and pyxis' `[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]`, Docker's
/// `docker://[USER@][REGISTRY/]IMAGE[:TAG|@DIGEST]`, and local sources (a
/// squashfs file, an OCI image layout). Pure: no I/O; safe from any thread.
namespace cohort::container {

/// Where an image without a registry comes from (Docker Hub's API host).
inline constexpr std::string_view kDockerHub = "registry-1.docker.io";
/// The longest reference accepted, in bytes.
inline constexpr std::size_t kMaxReferenceLength = 512;

/// An image in a registry.
struct ImageRef {
  std::string registry;    ///< HOST[:PORT], e.g. nvcr.io, 127.0.0.1:5000
  std::string repository;  ///< e.g. nvidia/pytorch, library/ubuntu
  std::string tag;         ///< e.g. 24.07-py3; "latest" when neither tag nor digest is written
  std::string digest;      ///< sha256:<64 hex>; empty: none. When set it names the image
  std::string user;        ///< the login of USER@; empty: the credentials file's for the registry
};

/// What kind of source a reference names.
enum class SourceKind {
  kRegistry,   ///< ImageSource::ref
  kSquashfs,   ///< ImageSource::path: a squashfs file (`PATH.sqsh`)
  kOciLayout,  ///< ImageSource::path: an OCI image layout, a folder or a tar archive of one
};

/// A parsed reference.
struct ImageSource {
  SourceKind kind = SourceKind::kRegistry;
  ImageRef ref;      ///< kRegistry
  std::string path;  ///< kSquashfs, kOciLayout: as written (relative paths stay relative)
};

/// Parses an image reference:
/// - `[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]` (enroot, pyxis), e.g.
///   `nvcr.io#nvidia/pytorch:24.07-py3`, `127.0.0.1:5000#tiny:1`, `ubuntu`
///   (Docker Hub's library/ubuntu:latest);
/// - `docker://[USER@][REGISTRY/]IMAGE[:TAG|@DIGEST]`, where the first path
///   component is a registry only if it holds '.' or ':' or is `localhost`
///   (Docker's rule; `docker://REGISTRY#IMAGE` is read as enroot's form);
/// - a path ending in `.sqsh`, absolute or with a slash (`./pytorch.sqsh`);
/// - `oci:PATH`, `oci-archive:PATH`, or another absolute or `./` path: an OCI
///   image layout (folder or tar archive; the program tells which).
/// Repositories follow the OCI distribution spec's grammar (lowercase
/// components separated by '/', joined inside by '.', '_', '__' or dashes),
/// tags `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, digests `sha256:` and 64
/// lowercase hex digits. InvalidArgument saying what is wrong and showing the
/// accepted form otherwise, and for references over kMaxReferenceLength.
[[nodiscard]] absl::StatusOr<ImageSource> ParseImageReference(std::string_view text);

/// The canonical `REGISTRY#REPOSITORY:TAG` form (`REGISTRY#REPOSITORY@DIGEST`
/// for a digest reference), for messages and cache keys. The user is left
/// out: it selects credentials, not the image.
[[nodiscard]] std::string FormatImageReference(const ImageRef& ref);

}  // namespace cohort::container
