// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "unique_fd.h"

/// A node's cache of unpacked images, shared by every cohort-image process
/// (and the stepds that run containers from it):
///
///     DIR/images/sha256-<hex>/rootfs/        the image's root filesystem
///     DIR/images/sha256-<hex>/image.json     what `cohort-image pull` prints (minus "cached")
///     DIR/images/sha256-<hex>/last-used      its mtime: when a pull last returned the image
///     DIR/images/sha256-<hex>/in-use.lock    see below
///     DIR/tmp/                               staging folders; litter after a crash
///     DIR/locks/                             one lock file per image reference
///
/// <hex> is the image manifest's digest (a squashfs file's own digest for
/// those). An image lands whole or not at all: it is built in a staging
/// folder under tmp/, synced, then renamed into images/.
///
/// **In use.** While some process holds a shared flock (LOCK_SH) on an
/// image's `in-use.lock`, eviction leaves the image alone. cohort-stepd
/// takes it before it mounts the rootfs and holds it for the container's
/// life; it then checks that `rootfs/` still exists (eviction may have run
/// between the pull and the lock) and pulls again when it does not.
namespace cohort::image {

/// A staging folder under DIR/tmp/, locked (flock on the folder) so that
/// another process's litter sweep leaves it alone; removed when destroyed
/// unless committed.
class StagingFolder {
 public:
  StagingFolder() = default;
  StagingFolder(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  ~StagingFolder();
  StagingFolder(StagingFolder&& other) noexcept;
  StagingFolder& operator=(StagingFolder&& other) noexcept;
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  /// Called once it has been renamed away: nothing left to remove.
  void MarkCommitted() { path_.clear(); }

 private:
  std::string path_;
  UniqueFd fd_;
};

/// What an eviction did.
struct Eviction {
  int removed = 0;
  int in_use = 0;          ///< images skipped because a process held their in-use lock
  std::int64_t bytes = 0;  ///< what the images left take (image.json's bytes)
};

/// One cache folder. Every method may block on disk; the process is the
/// only thread using it. Holds no lock between calls except what a returned
/// UniqueFd or StagingFolder holds.
class ImageCache {
 public:
  /// Opens the cache at `dir`, creating it and its subfolders (mode 0755).
  /// A root process refuses a folder that another user owns or that others
  /// may write (FailedPrecondition saying how to fix it); Unavailable when
  /// it cannot be created.
  [[nodiscard]] static absl::StatusOr<ImageCache> Open(const std::string& dir);

  /// The cache's absolute path.
  [[nodiscard]] const std::string& root() const { return root_; }
  /// DIR/images/sha256-<hex> for a sha256 digest.
  [[nodiscard]] std::string ImageFolder(std::string_view digest) const;

  /// Takes the exclusive lock of an image reference (`key`, any text: it is
  /// hashed into the lock's name), blocking until no other pull holds it.
  /// Released when the returned descriptor closes.
  [[nodiscard]] absl::StatusOr<UniqueFd> LockReference(std::string_view key) const;

  /// A new staging folder (mode 0755) under DIR/tmp/.
  [[nodiscard]] absl::StatusOr<StagingFolder> MakeStaging() const;

  /// The cached image's image.json text, marking it used now (last-used);
  /// nullopt when it is not cached.
  [[nodiscard]] std::optional<std::string> Find(std::string_view digest) const;

  /// Syncs the staging folder's filesystem and renames the folder to
  /// ImageFolder(digest). AlreadyExists when another process cached the
  /// image first (the staging folder then stays for its destructor);
  /// Unavailable when the rename or sync fails.
  [[nodiscard]] absl::Status Commit(StagingFolder& staging, std::string_view digest) const;

  /// Removes what DIR/tmp/ holds that no process locks: staging folders of
  /// crashed pulls, images half-evicted. Best effort.
  void RemoveLitter() const;

  /// Evicts images, least recently used first, until those left take at most
  /// `max_bytes`, skipping `keep` (a digest; the image just returned) and
  /// images in use (their in-use lock cannot be taken at once). An evicted
  /// image is renamed into DIR/tmp/ first, then deleted.
  [[nodiscard]] absl::StatusOr<Eviction> Evict(std::int64_t max_bytes, std::string_view keep) const;

 private:
  explicit ImageCache(std::string root) : root_(std::move(root)) {}

  std::string root_;
};

}  // namespace cohort::image
