// SPDX-License-Identifier: Apache-2.0
#include "image_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "file_tree.h"
#include "sha256.h"

namespace cohort::image {
namespace {

constexpr std::string_view kImagePrefix = "sha256-";
// Held shared while a staging folder is being created and locked, exclusive
// while the litter sweep picks what to remove: so that the sweep never takes
// a folder between its mkdtemp and its flock.
constexpr std::string_view kTmpLock = "locks/tmp.lock";

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::UnavailableError(fmt::format("cannot {} {}: {}", what, path, std::strerror(errno)));
}

absl::Status MakeFolder(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return Errno("create", path);
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> Flock(const std::string& path, int operation) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return Errno("open", path);
  while (::flock(fd.get(), operation) != 0) {
    if (errno != EINTR) return Errno("lock", path);
  }
  return fd;
}

std::vector<std::string> Names(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

std::string RandomSuffix() {
  std::array<unsigned char, 8> bytes{};
  UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || ::read(fd.get(), bytes.data(), bytes.size()) != 8) {
    return fmt::format("{}-{}", ::getpid(), ::time(nullptr));
  }
  std::string out;
  for (const unsigned char byte : bytes) out += fmt::format("{:02x}", byte);
  return out;
}

}  // namespace

StagingFolder::~StagingFolder() {
  if (!path_.empty()) (void)RemoveTree(path_);
}

StagingFolder::StagingFolder(StagingFolder&& other) noexcept
    : path_(std::exchange(other.path_, {})), fd_(std::move(other.fd_)) {}

StagingFolder& StagingFolder::operator=(StagingFolder&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) (void)RemoveTree(path_);
    path_ = std::exchange(other.path_, {});
    fd_ = std::move(other.fd_);
  }
  return *this;
}

absl::StatusOr<ImageCache> ImageCache::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the cache folder is empty; pass --cache DIR");
  // Create every missing folder of the path, as mkdir -p.
  for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (absl::Status status = MakeFolder(prefix); !status.ok()) return status;
    if (slash == std::string::npos) break;
  }
  std::array<char, PATH_MAX> resolved{};
  if (::realpath(dir.c_str(), resolved.data()) == nullptr) return Errno("resolve", dir);
  std::string root(resolved.data());
  struct stat info {};
  if (::stat(root.c_str(), &info) != 0) return Errno("inspect", root);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format("cache {} is not a folder", root));
  }
  if (::geteuid() == 0 && (info.st_uid != 0 || (info.st_mode & 022) != 0)) {
    return absl::FailedPreconditionError(fmt::format(
        "cache {} is owned by uid {} with mode {:o}; images there must be root's alone: "
        "chown root {} && chmod 755 {}",
        root, info.st_uid, info.st_mode & 07777, root, root));
  }
  for (const char* sub : {"images", "tmp", "locks"}) {
    if (absl::Status status = MakeFolder(root + "/" + sub); !status.ok()) return status;
  }
  return ImageCache(std::move(root));
}

std::string ImageCache::ImageFolder(std::string_view digest) const {
  return fmt::format("{}/images/{}{}", root_, kImagePrefix, digest.substr(digest.find(':') + 1));
}

absl::StatusOr<UniqueFd> ImageCache::LockReference(std::string_view key) const {
  // Readable, and unique through the hash.
  std::string name;
  for (const char c : key.substr(0, 80)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_';
    name.push_back(plain ? c : '_');
  }
  name += "-" + Sha256Digest(key).substr(7, 16);
  return Flock(fmt::format("{}/locks/{}.lock", root_, name), LOCK_EX);
}

absl::StatusOr<StagingFolder> ImageCache::MakeStaging() const {
  absl::StatusOr<UniqueFd> guard = Flock(fmt::format("{}/{}", root_, kTmpLock), LOCK_SH);
  if (!guard.ok()) return guard.status();
  std::string path = root_ + "/tmp/pull-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr) return Errno("create a staging folder in", root_ + "/tmp");
  StagingFolder staging(path, UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  if (staging.fd() < 0) return Errno("open", path);
  if (::flock(staging.fd(), LOCK_EX) != 0) return Errno("lock", path);
  if (::chmod(path.c_str(), 0755) != 0) return Errno("set the mode of", path);
  return staging;
}

std::optional<std::string> ImageCache::Find(std::string_view digest) const {
  const std::string folder = ImageFolder(digest);
  UniqueFd fd(::open((folder + "/image.json").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::nullopt;
  std::string text;
  std::array<char, 8192> buffer{};
  ssize_t got = 0;
  while ((got = ::read(fd.get(), buffer.data(), buffer.size())) > 0) {
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  if (got < 0 || text.empty()) return std::nullopt;
  const std::string used = folder + "/last-used";
  if (::utimensat(AT_FDCWD, used.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0) {
    UniqueFd created(::open(used.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  }
  return text;
}

absl::Status ImageCache::Commit(StagingFolder& staging, std::string_view digest) const {
  if (::syncfs(staging.fd()) != 0) return Errno("sync the filesystem of", staging.path());
  const std::string target = ImageFolder(digest);
  if (::rename(staging.path().c_str(), target.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) {
      return absl::AlreadyExistsError(fmt::format("{} is already cached", target));
    }
    return Errno(fmt::format("move {} to", staging.path()), target);
  }
  staging.MarkCommitted();
  // The rename itself must reach the disk before the image is announced.
  UniqueFd images(::open((root_ + "/images").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (images.valid()) ::fsync(images.get());
  return absl::OkStatus();
}

void ImageCache::RemoveLitter() const {
  const std::string tmp = root_ + "/tmp";
  std::vector<std::pair<std::string, UniqueFd>> stale;
  {
    absl::StatusOr<UniqueFd> guard = Flock(fmt::format("{}/{}", root_, kTmpLock), LOCK_EX);
    if (!guard.ok()) return;
    for (const std::string& name : Names(tmp)) {
      const std::string path = tmp + "/" + name;
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd.valid()) {
        if (errno == ENOTDIR || errno == ELOOP) ::unlink(path.c_str());
        continue;
      }
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) stale.emplace_back(path, std::move(fd));
    }
  }
  // Removed outside the sweep's lock, so that new pulls need not wait; the
  // folders' own locks keep other sweeps off them.
  for (const auto& [path, fd] : stale) (void)RemoveTree(path);
}

absl::StatusOr<Eviction> ImageCache::Evict(std::int64_t max_bytes, std::string_view keep) const {
  struct Entry {
    std::string name;
    std::int64_t bytes = 0;
    timespec used{};
  };
  std::vector<Entry> entries;
  Eviction eviction;
  const std::string images = root_ + "/images";
  for (const std::string& name : Names(images)) {
    if (!name.starts_with(kImagePrefix)) continue;
    Entry entry{.name = name};
    const std::string folder = images + "/" + name;
    UniqueFd fd(::open((folder + "/image.json").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (fd.valid()) {
      std::string text;
      std::array<char, 8192> buffer{};
      ssize_t got = 0;
      while ((got = ::read(fd.get(), buffer.data(), buffer.size())) > 0) {
        text.append(buffer.data(), static_cast<std::size_t>(got));
      }
      const nlohmann::json record = nlohmann::json::parse(text, nullptr, false);
      if (!record.is_discarded() && record.is_object() && record.contains("bytes") &&
          record["bytes"].is_number_integer()) {
        entry.bytes = record["bytes"].get<std::int64_t>();
      }
    }
    struct stat info {};
    if (::lstat((folder + "/last-used").c_str(), &info) == 0) entry.used = info.st_mtim;
    eviction.bytes += entry.bytes;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.used.tv_sec != b.used.tv_sec) return a.used.tv_sec < b.used.tv_sec;
    if (a.used.tv_nsec != b.used.tv_nsec) return a.used.tv_nsec < b.used.tv_nsec;
    return a.name < b.name;
  });
  const std::string kept = fmt::format("{}{}", kImagePrefix, keep.substr(keep.find(':') + 1));
  for (const Entry& entry : entries) {
    if (eviction.bytes <= max_bytes) break;
    if (entry.name == kept) continue;
    const std::string folder = images + "/" + entry.name;
    UniqueFd in_use(::open((folder + "/in-use.lock").c_str(),
                           O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!in_use.valid()) continue;
    if (::flock(in_use.get(), LOCK_EX | LOCK_NB) != 0) {
      ++eviction.in_use;
      continue;
    }
    // Locked before the rename, so that a litter sweep never removes it
    // under this process.
    UniqueFd held(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!held.valid() || ::flock(held.get(), LOCK_EX | LOCK_NB) != 0) continue;
    const std::string doomed = fmt::format("{}/tmp/evict-{}", root_, RandomSuffix());
    if (::rename(folder.c_str(), doomed.c_str()) != 0) continue;
    (void)RemoveTree(doomed);
    ++eviction.removed;
    eviction.bytes -= entry.bytes;
  }
  return eviction;
}

}  // namespace cohort::image
