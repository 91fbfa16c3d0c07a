// SPDX-License-Identifier: Apache-2.0
#include "image_puller.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "blob_source.h"
#include "cohort/fmt_absl.h"
#include "credentials.h"
#include "file_tree.h"
#include "image_cache.h"
#include "layer_extract.h"
#include "oci_layout.h"
#include "open_as.h"
#include "registry_client.h"
#include "sha256.h"
#include "unique_fd.h"

extern char** environ;

namespace cohort::image {
namespace {

// Without --max-cache-bytes, what one layer may take (the filesystem's free
// space is the real bound).
constexpr std::int64_t kNoBound = std::int64_t{1} << 50;
constexpr int kMaxIndexDepth = 2;

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::UnavailableError(fmt::format("cannot {} {}: {}", what, path, std::strerror(errno)));
}

absl::Status WriteFile(const std::string& path, std::string_view text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return Errno("create", path);
  while (!text.empty()) {
    const ssize_t put = ::write(fd.get(), text.data(), text.size());
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return Errno("write", path);
    text.remove_prefix(static_cast<std::size_t>(put));
  }
  return absl::OkStatus();
}

nlohmann::json RecordJson(const PulledImage& image) {
  return nlohmann::json{{"reference", image.reference},
                        {"digest", image.digest},
                        {"rootfs", image.rootfs},
                        {"env", image.env},
                        {"working_dir", image.working_dir},
                        {"entrypoint", image.entrypoint},
                        {"cmd", image.cmd},
                        {"user", image.user},
                        {"bytes", image.bytes}};
}

absl::StatusOr<PulledImage> FromRecord(const std::string& text, const std::string& reference) {
  const nlohmann::json record = nlohmann::json::parse(text, nullptr, false);
  if (record.is_discarded() || !record.is_object()) {
    return absl::InternalError("the cached image.json is not a JSON object");
  }
  PulledImage image;
  try {
    image.digest = record.at("digest").get<std::string>();
    image.rootfs = record.at("rootfs").get<std::string>();
    image.env = record.value("env", std::vector<std::string>{});
    image.working_dir = record.value("working_dir", std::string());
    image.entrypoint = record.value("entrypoint", std::vector<std::string>{});
    image.cmd = record.value("cmd", std::vector<std::string>{});
    image.user = record.value("user", std::string());
    image.bytes = record.value("bytes", std::int64_t{0});
  } catch (const nlohmann::json::exception& error) {
    return absl::InternalError(fmt::format("the cached image.json is malformed: {}", error.what()));
  }
  image.reference = reference;
  image.cached = true;
  return image;
}

std::optional<PulledImage> Cached(const ImageCache& cache, std::string_view digest,
                                  const std::string& reference) {
  std::optional<std::string> text = cache.Find(digest);
  if (!text.has_value()) return std::nullopt;
  absl::StatusOr<PulledImage> image = FromRecord(*text, reference);
  // A record that cannot be read is pulled again (the new one replaces it
  // only after eviction; until then this pull fails the same way).
  if (!image.ok()) return std::nullopt;
  return *std::move(image);
}

// An image manifest from what `fetched` names, following an index to the
// entry for `platform` (or its only entry, when that has no platform).
absl::StatusOr<std::pair<FetchedManifest, Manifest>> Resolve(BlobSource& source,
                                                             FetchedManifest fetched,
                                                             const Platform& platform,
                                                             std::int64_t max_layer) {
  for (int depth = 0; depth <= kMaxIndexDepth; ++depth) {
    absl::StatusOr<Manifest> manifest = ParseManifest(fetched.media_type, fetched.body, max_layer);
    if (!manifest.ok()) return manifest.status();
    if (!manifest->is_index) return std::make_pair(std::move(fetched), *std::move(manifest));
    absl::StatusOr<Descriptor> entry =
        manifest->manifests.size() == 1 && manifest->manifests[0].platform.os.empty()
            ? absl::StatusOr<Descriptor>(manifest->manifests[0])
            : ChoosePlatform(*manifest, platform);
    if (!entry.ok()) return entry.status();
    absl::StatusOr<FetchedManifest> next = source.FetchManifest(entry->digest);
    if (!next.ok()) return next.status();
    if (next->media_type.empty()) next->media_type = entry->media_type;
    fetched = *std::move(next);
  }
  return absl::InvalidArgumentError(
      fmt::format("the image's indexes nest more than {} deep", kMaxIndexDepth));
}

absl::StatusOr<PulledImage> Land(const ImageCache& cache, StagingFolder& staging,
                                 PulledImage image) {
  absl::StatusOr<std::int64_t> bytes = DiskUsage(staging.path() + "/rootfs");
  if (!bytes.ok()) return bytes.status();
  image.bytes = *bytes;
  image.rootfs = cache.ImageFolder(image.digest) + "/rootfs";
  for (const auto& [name, text] :
       {std::pair<const char*, std::string>{"image.json", RecordJson(image).dump(2)},
        {"last-used", ""},
        {"in-use.lock", ""}}) {
    if (absl::Status status = WriteFile(staging.path() + "/" + name, text); !status.ok()) {
      return status;
    }
  }
  absl::Status committed = cache.Commit(staging, image.digest);
  if (committed.code() == absl::StatusCode::kAlreadyExists) {
    if (std::optional<PulledImage> other = Cached(cache, image.digest, image.reference)) {
      return *std::move(other);
    }
  }
  if (!committed.ok()) return committed;
  return image;
}

// Downloads and unpacks the image `manifest` describes.
absl::StatusOr<PulledImage> Build(const ImageCache& cache, BlobSource& source,
                                  const std::string& reference, const std::string& digest,
                                  const Manifest& manifest, std::int64_t max_bytes) {
  if (!IsImageConfigType(manifest.config.media_type)) {
    return absl::UnimplementedError(
        fmt::format("unsupported media type \"{}\" for the config; this is not a container image",
                    manifest.config.media_type.substr(0, 120)));
  }
  for (const Descriptor& layer : manifest.layers) {
    if (absl::Status status = CheckLayerMediaType(layer.media_type); !status.ok()) {
      return absl::Status(status.code(),
                          fmt::format("layer {}: {}", layer.digest, status.message()));
    }
  }
  absl::StatusOr<StagingFolder> staging = cache.MakeStaging();
  if (!staging.ok()) return staging.status();
  const std::string rootfs = staging->path() + "/rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0) return Errno("create", rootfs);
  const std::string config_path = staging->path() + "/config.json";
  if (absl::Status status = source.FetchBlob(manifest.config, "config", config_path);
      !status.ok()) {
    return status;
  }
  absl::StatusOr<std::string> config_text = ReadSmallFile(config_path, kMaxManifestBytes);
  if (!config_text.ok()) return config_text.status();
  absl::StatusOr<ImageConfig> config = ParseImageConfig(*config_text);
  if (!config.ok()) return config.status();
  ::unlink(config_path.c_str());
  if (config->diff_ids != 0 && config->diff_ids != static_cast<int>(manifest.layers.size())) {
    return absl::InvalidArgumentError(
        fmt::format("the image config lists {} layers and the manifest {}; the image is broken",
                    config->diff_ids, manifest.layers.size()));
  }
  for (const Descriptor& layer : manifest.layers) {
    const std::string path = fmt::format("{}/layer-{}", staging->path(), layer.digest.substr(7));
    if (absl::Status status = source.FetchBlob(layer, "layer", path); !status.ok()) return status;
    if (absl::Status status = ExtractLayer(path, layer.digest, rootfs, max_bytes); !status.ok()) {
      return status;
    }
    ::unlink(path.c_str());
  }
  PulledImage image;
  image.reference = reference;
  image.digest = digest;
  image.env = config->env;
  image.working_dir = config->working_dir;
  image.entrypoint = config->entrypoint;
  image.cmd = config->cmd;
  image.user = config->user;
  return Land(cache, *staging, std::move(image));
}

absl::StatusOr<std::vector<Credential>> LoadCredentials(const PullOptions& options) {
  if (options.credentials_path.empty()) return std::vector<Credential>{};
  absl::StatusOr<std::string> text =
      ReadCredentialsFile(options.credentials_path, options.credentials_uid);
  if (!text.ok()) return text.status();
  return ParseCredentials(*text, options.credentials_path);
}

absl::StatusOr<PulledImage> PullRegistry(const ImageCache& cache, const container::ImageRef& ref,
                                         const PullOptions& options, std::int64_t max_bytes) {
  const std::string reference = container::FormatImageReference(ref);
  if (!ref.digest.empty()) {
    if (std::optional<PulledImage> image = Cached(cache, ref.digest, reference))
      return *std::move(image);
  }
  absl::StatusOr<std::vector<Credential>> credentials = LoadCredentials(options);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<UniqueFd> lock = cache.LockReference(reference);
  if (!lock.ok()) return lock.status();
  RegistryOptions registry{.ca_file = options.ca_file,
                           .credentials = *std::move(credentials),
                           .credentials_path = options.credentials_path,
                           .mirrors = {},
                           .max_rate = options.limit_rate};
  if (const auto it = options.mirrors.find(ref.registry); it != options.mirrors.end()) {
    registry.mirrors = it->second;
  }
  RegistryClient client(ref, std::move(registry));
  absl::StatusOr<FetchedManifest> fetched =
      client.FetchManifest(ref.digest.empty() ? ref.tag : ref.digest);
  if (!fetched.ok()) return fetched.status();
  auto resolved = Resolve(client, *std::move(fetched), options.platform, max_bytes);
  if (!resolved.ok()) return resolved.status();
  const std::string& digest = resolved->first.digest;
  if (std::optional<PulledImage> image = Cached(cache, digest, reference)) return *std::move(image);
  return Build(cache, client, reference, digest, resolved->second, max_bytes);
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  std::array<char, PATH_MAX> resolved{};
  if (::realpath(path.c_str(), resolved.data()) == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(fmt::format("{} does not exist; check the path", path));
    }
    return Errno("resolve", path);
  }
  return std::string(resolved.data());
}

// A squashfs file or OCI layout on the node, as it is read: by its path, or,
// for a job's owner, through the descriptor the owner opened it by
// (/proc/self/fd/N, inherited by unsquashfs), so that root reads nothing
// the owner could not and a path swapped after the open changes nothing.
struct LocalSource {
  std::string read_path;
  std::string key;  ///< its real path: what a lock is named by
  UniqueFd fd;
};

absl::StatusOr<LocalSource> OpenLocal(const std::string& path, std::optional<uid_t> owner) {
  LocalSource source;
  if (!owner) {
    absl::StatusOr<std::string> real = RealPath(path);
    if (!real.ok()) return real.status();
    source.read_path = *real;
    source.key = *std::move(real);
    return source;
  }
  absl::StatusOr<UniqueFd> fd = OpenAsUser(path, owner, "the image");
  if (!fd.ok()) {
    if (fd.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(fmt::format("{} does not exist; check the path", path));
    }
    return fd.status();
  }
  if (::fcntl(fd->get(), F_SETFD, 0) != 0) return Errno("keep open", path);
  source.read_path = fmt::format("/proc/self/fd/{}", fd->get());
  absl::StatusOr<std::string> real = RealPath(source.read_path);
  if (!real.ok()) return real.status();
  source.key = *std::move(real);
  source.fd = *std::move(fd);
  return source;
}

absl::Status RunUnsquashfs(const std::string& file, const std::string& rootfs,
                           const std::string& log) {
  std::vector<std::string> args = {"unsquashfs", "-no-progress", "-f", "-d", rootfs, file};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int error = ::posix_spawnp(&pid, "unsquashfs", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::UnavailableError(
        fmt::format("cannot run unsquashfs: {}; install squashfs-tools", std::strerror(error)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Errno("wait for", "unsquashfs");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  absl::StatusOr<std::string> output = ReadSmallFile(log, 1 << 20);
  std::string last;
  if (output.ok()) {
    std::string_view text = *output;
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    last = std::string(text.substr(text.rfind('\n') + 1));
  }
  return absl::InvalidArgumentError(fmt::format(
      "unsquashfs could not unpack {} ({}: {}); check that it is a squashfs image", file,
      WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                        : fmt::format("signal {}", WTERMSIG(status)),
      last.substr(0, 300)));
}

absl::StatusOr<PulledImage> PullSquashfs(const ImageCache& cache, const LocalSource& source,
                                         const std::string& reference) {
  const std::string& file = source.read_path;
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) return Errno("inspect", source.key);
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format("{} is not a regular file", source.key));
  }
  absl::StatusOr<std::string> digest = Sha256OfFile(file);
  if (!digest.ok()) return digest.status();
  if (std::optional<PulledImage> image = Cached(cache, *digest, reference))
    return *std::move(image);
  absl::StatusOr<UniqueFd> lock = cache.LockReference("squashfs:" + *digest);
  if (!lock.ok()) return lock.status();
  if (std::optional<PulledImage> image = Cached(cache, *digest, reference))
    return *std::move(image);
  absl::StatusOr<StagingFolder> staging = cache.MakeStaging();
  if (!staging.ok()) return staging.status();
  const std::string log = staging->path() + "/unsquashfs.log";
  if (absl::Status status = RunUnsquashfs(file, staging->path() + "/rootfs", log); !status.ok()) {
    return status;
  }
  ::unlink(log.c_str());
  PulledImage image;
  image.reference = reference;
  image.digest = *digest;
  return Land(cache, *staging, std::move(image));
}

absl::StatusOr<PulledImage> PullLayout(const ImageCache& cache, const LocalSource& source,
                                       const std::string& reference, const PullOptions& options,
                                       std::int64_t max_bytes) {
  const std::string& where = source.read_path;
  struct stat info {};
  if (::stat(where.c_str(), &info) != 0) return Errno("inspect", source.key);
  absl::StatusOr<UniqueFd> lock = cache.LockReference("oci:" + source.key);
  if (!lock.ok()) return lock.status();
  std::string folder = where;
  StagingFolder unpacked;  // a tar archive's layout, removed at the end
  if (S_ISREG(info.st_mode)) {
    absl::StatusOr<StagingFolder> staging = cache.MakeStaging();
    if (!staging.ok()) return staging.status();
    unpacked = *std::move(staging);
    folder = unpacked.path() + "/layout";
    if (::mkdir(folder.c_str(), 0700) != 0) return Errno("create", folder);
    if (absl::Status status = ExtractLayer(where, source.key, folder, max_bytes); !status.ok()) {
      return status;
    }
  } else if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is neither a folder nor a file; give an OCI image layout or a tar of one", source.key));
  }
  absl::StatusOr<OciLayout> layout = OciLayout::Open(folder);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<FetchedManifest> index = layout->FetchManifest("");
  if (!index.ok()) return index.status();
  auto resolved = Resolve(*layout, *std::move(index), options.platform, max_bytes);
  if (!resolved.ok()) return resolved.status();
  const std::string& digest = resolved->first.digest;
  if (std::optional<PulledImage> image = Cached(cache, digest, reference)) return *std::move(image);
  return Build(cache, *layout, reference, digest, resolved->second, max_bytes);
}

}  // namespace

std::string PulledImageToJson(const PulledImage& image) {
  nlohmann::json json = RecordJson(image);
  json["cached"] = image.cached;
  return json.dump();
}

std::string DisplayReference(const container::ImageSource& source) {
  if (source.kind == container::SourceKind::kRegistry) {
    return container::FormatImageReference(source.ref);
  }
  return source.path;
}

absl::StatusOr<PulledImage> PullImage(const container::ImageSource& source,
                                      const PullOptions& options) {
  absl::StatusOr<ImageCache> cache = ImageCache::Open(options.cache_dir);
  if (!cache.ok()) return cache.status();
  cache->RemoveLitter();
  const std::int64_t max_bytes = options.max_cache_bytes > 0 ? options.max_cache_bytes : kNoBound;
  const std::string reference = DisplayReference(source);
  absl::StatusOr<PulledImage> image;
  switch (source.kind) {
    case container::SourceKind::kRegistry:
      image = PullRegistry(*cache, source.ref, options, max_bytes);
      break;
    case container::SourceKind::kSquashfs:
    case container::SourceKind::kOciLayout: {
      absl::StatusOr<LocalSource> local = OpenLocal(source.path, options.owner);
      if (!local.ok()) return local.status();
      image = source.kind == container::SourceKind::kSquashfs
                  ? PullSquashfs(*cache, *local, reference)
                  : PullLayout(*cache, *local, reference, options, max_bytes);
      break;
    }
  }
  if (image.ok() && options.max_cache_bytes > 0) {
    // A failed eviction leaves the cache over its bound until the next pull;
    // the image itself is there.
    (void)cache->Evict(options.max_cache_bytes, image->digest);
  }
  return image;
}

}  // namespace cohort::image
