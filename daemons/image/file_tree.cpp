// SPDX-License-Identifier: Apache-2.0
#include "file_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace cohort::image {
namespace {

absl::Status Errno(std::string_view what, const std::string& name, int error) {
  return absl::UnavailableError(fmt::format("cannot {} {}: {}", what, name, std::strerror(error)));
}

// The names in the folder `fd` (not . and ..); the descriptor stays open.
absl::StatusOr<std::vector<std::string>> ListFolder(int fd, const std::string& shown) {
  const int copy = ::dup(fd);
  if (copy < 0) return Errno("read the folder", shown, errno);
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    const int error = errno;
    ::close(copy);
    return Errno("read the folder", shown, error);
  }
  ::rewinddir(dir);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) return Errno("read the folder", shown, error);
  return names;
}

absl::Status RemoveAt(int dir_fd, const std::string& name, dev_t device, const std::string& shown) {
  struct stat info {};
  if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? absl::OkStatus() : Errno("inspect", shown, errno);
  }
  if (!S_ISDIR(info.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return Errno("remove", shown, errno);
    }
    return absl::OkStatus();
  }
  if (info.st_dev != device) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is the mount point of another filesystem; unmount it before removing the tree", shown));
  }
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Errno("open", shown, errno);
  absl::StatusOr<std::vector<std::string>> names = ListFolder(fd.get(), shown);
  if (!names.ok()) return names.status();
  for (const std::string& child : *names) {
    if (absl::Status status = RemoveAt(fd.get(), child, device, shown + "/" + child);
        !status.ok()) {
      return status;
    }
  }
  fd.Reset();
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Errno("remove", shown, errno);
  }
  return absl::OkStatus();
}

absl::Status UsageAt(int dir_fd, const std::string& name, dev_t device, std::int64_t& total,
                     std::set<std::pair<dev_t, ino_t>>& linked, const std::string& shown) {
  struct stat info {};
  if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("inspect", shown, errno);
  }
  if (info.st_nlink > 1 && !S_ISDIR(info.st_mode) &&
      !linked.emplace(info.st_dev, info.st_ino).second) {
    return absl::OkStatus();
  }
  total += static_cast<std::int64_t>(info.st_blocks) * 512;
  if (!S_ISDIR(info.st_mode) || info.st_dev != device) return absl::OkStatus();
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Errno("open", shown, errno);
  absl::StatusOr<std::vector<std::string>> names = ListFolder(fd.get(), shown);
  if (!names.ok()) return names.status();
  for (const std::string& child : *names) {
    if (absl::Status status = UsageAt(fd.get(), child, device, total, linked, shown + "/" + child);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// The folder holding `path` and the last component's name.
std::pair<std::string, std::string> Split(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::size_t slash = trimmed.rfind('/');
  if (slash == std::string::npos) return {".", trimmed};
  return {slash == 0 ? "/" : trimmed.substr(0, slash), trimmed.substr(slash + 1)};
}

}  // namespace

absl::Status RemoveTreeAt(int dir_fd, const std::string& name) {
  struct stat parent {};
  if (::fstat(dir_fd, &parent) != 0) return Errno("inspect the folder of", name, errno);
  return RemoveAt(dir_fd, name, parent.st_dev, name);
}

absl::Status RemoveTree(const std::string& path) {
  const auto [folder, name] = Split(path);
  UniqueFd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT ? absl::OkStatus() : Errno("open", folder, errno);
  struct stat parent {};
  if (::fstat(fd.get(), &parent) != 0) return Errno("inspect", folder, errno);
  return RemoveAt(fd.get(), name, parent.st_dev, path);
}

absl::StatusOr<std::int64_t> DiskUsage(const std::string& path) {
  const auto [folder, name] = Split(path);
  UniqueFd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Errno("open", folder, errno);
  struct stat root {};
  if (::fstatat(fd.get(), name.c_str(), &root, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("inspect", path, errno);
  }
  std::int64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> linked;
  if (absl::Status status = UsageAt(fd.get(), name, root.st_dev, total, linked, path);
      !status.ok()) {
    return status;
  }
  return total;
}

absl::StatusOr<UniqueFd> OpenFolderBeneath(int root_fd, std::string_view relative) {
  UniqueFd current(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!current.valid()) return Errno("duplicate the descriptor of", "the root", errno);
  std::size_t start = 0;
  while (start <= relative.size()) {
    std::size_t slash = relative.find('/', start);
    if (slash == std::string_view::npos) slash = relative.size();
    const std::string component(relative.substr(start, slash - start));
    start = slash + 1;
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      return absl::FailedPreconditionError(fmt::format("path {} holds \"..\"", relative));
    }
    UniqueFd next(::openat(current.get(), component.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) {
      if (errno == ENOENT) {
        return absl::NotFoundError(fmt::format("{} does not exist", relative.substr(0, slash)));
      }
      if (errno == ELOOP || errno == ENOTDIR) {
        return absl::FailedPreconditionError(
            fmt::format("{} is a symlink or not a folder", relative.substr(0, slash)));
      }
      return Errno("open", std::string(relative.substr(0, slash)), errno);
    }
    current = std::move(next);
  }
  return current;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::int64_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::NotFoundError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  std::string text;
  std::array<char, 65536> buffer{};
  ssize_t got = 0;
  while ((got = ::read(fd.get(), buffer.data(), buffer.size())) > 0) {
    text.append(buffer.data(), static_cast<std::size_t>(got));
    if (static_cast<std::int64_t>(text.size()) > limit) {
      return absl::InvalidArgumentError(
          fmt::format("{} is over the limit of {} bytes", path, limit));
    }
  }
  if (got < 0) {
    return absl::UnavailableError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  return text;
}

}  // namespace cohort::image
