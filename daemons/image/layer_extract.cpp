// SPDX-License-Identifier: Apache-2.0
#include "layer_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/fmt_absl.h"
#include "file_tree.h"
#include "unique_fd.h"

namespace cohort::image {
namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";
// aufs' own bookkeeping (.wh..wh.plnk, .wh..wh.aufs): not content.
constexpr std::string_view kAufsMeta = ".wh..wh.";

struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct ArchiveWriteDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};

// Goes back to the working folder it found when it goes out of scope.
class WorkingFolder {
 public:
  WorkingFolder() : saved_(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}
  ~WorkingFolder() {
    if (saved_.valid()) (void)::fchdir(saved_.get());
  }
  WorkingFolder(const WorkingFolder&) = delete;
  WorkingFolder& operator=(const WorkingFolder&) = delete;

 private:
  UniqueFd saved_;
};

std::string Shown(std::string_view path) {
  std::string out;
  for (const char c : path.substr(0, 200)) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte == 0x7f ? '?' : c);
  }
  return out;
}

// The entry's path relative to the root: "./" and empty components dropped.
// FailedPrecondition for an absolute path or a ".." component.
absl::StatusOr<std::string> CleanPath(std::string_view path, std::string_view what) {
  if (path.starts_with('/')) {
    return absl::FailedPreconditionError(
        fmt::format("{} \"{}\" has an absolute path; the layer is unsafe", what, Shown(path)));
  }
  std::string clean;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view component = path.substr(start, slash - start);
    start = slash + 1;
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      return absl::FailedPreconditionError(
          fmt::format("{} \"{}\" holds \"..\"; the layer is unsafe", what, Shown(path)));
    }
    if (!clean.empty()) clean.push_back('/');
    clean.append(component);
  }
  return clean;
}

std::pair<std::string, std::string> SplitParent(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// The folder holding `path` under the root, opened without passing through
// a symlink. nullopt-like: an invalid fd when it does not exist yet.
absl::StatusOr<UniqueFd> OpenParent(int root_fd, const std::string& parent,
                                    const std::string& entry) {
  absl::StatusOr<UniqueFd> fd = OpenFolderBeneath(root_fd, parent);
  if (fd.ok()) return fd;
  if (fd.status().code() == absl::StatusCode::kNotFound) return UniqueFd();
  if (fd.status().code() == absl::StatusCode::kFailedPrecondition) {
    return absl::FailedPreconditionError(
        fmt::format("entry \"{}\" passes through a symlink or a file ({}); the layer is unsafe",
                    Shown(entry), fd.status().message()));
  }
  return fd.status();
}

// Removes the children of `folder` (relative to the root, open as `fd`) that
// this layer did not write, descending into the folders it did.
absl::Status RemoveUnwritten(int fd, const std::string& folder,
                             const std::set<std::string>& written) {
  const int copy = ::dup(fd);
  DIR* dir = copy >= 0 ? ::fdopendir(copy) : nullptr;
  if (dir == nullptr) {
    if (copy >= 0) ::close(copy);
    return absl::UnavailableError(
        fmt::format("cannot read folder \"{}\": {}", Shown(folder), std::strerror(errno)));
  }
  ::rewinddir(dir);
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : names) {
    const std::string path = folder.empty() ? name : folder + "/" + name;
    if (!written.contains(path)) {
      if (absl::Status status = RemoveTreeAt(fd, name); !status.ok()) return status;
      continue;
    }
    UniqueFd child(::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child.valid()) continue;  // a file or symlink this layer wrote
    if (absl::Status status = RemoveUnwritten(child.get(), path, written); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

class LayerWriter {
 public:
  LayerWriter(int root_fd, const std::string& layer, std::int64_t max_bytes)
      : root_fd_(root_fd), layer_(layer), max_bytes_(max_bytes) {}

  absl::Status Run(archive* reader, archive* writer) {
    while (true) {
      archive_entry* entry = nullptr;
      const int got = archive_read_next_header(reader, &entry);
      if (got == ARCHIVE_EOF) break;
      if (got < ARCHIVE_WARN) {
        return absl::InvalidArgumentError(
            fmt::format("layer {} is not a readable tar: {}", layer_, ErrorText(reader)));
      }
      if (absl::Status status = Entry(reader, writer, entry); !status.ok()) return status;
    }
    if (archive_write_close(writer) < ARCHIVE_WARN) {
      return absl::UnavailableError(
          fmt::format("cannot finish layer {}: {}", layer_, ErrorText(writer)));
    }
    return absl::OkStatus();
  }

 private:
  static std::string ErrorText(archive* a) {
    const char* text = archive_error_string(a);
    return text != nullptr ? text : "unknown error";
  }

  void MarkWritten(const std::string& path) {
    std::string prefix = path;
    while (!prefix.empty() && written_.insert(prefix).second) {
      const std::size_t slash = prefix.rfind('/');
      prefix = slash == std::string::npos ? std::string() : prefix.substr(0, slash);
    }
  }

  absl::Status Whiteout(const std::string& parent, const std::string& name,
                        const std::string& path) {
    absl::StatusOr<UniqueFd> folder = OpenParent(root_fd_, parent, path);
    if (!folder.ok()) return folder.status();
    if (!folder->valid()) return absl::OkStatus();  // nothing below to hide
    if (name == kOpaque) return RemoveUnwritten(folder->get(), parent, written_);
    if (name.starts_with(kAufsMeta)) return absl::OkStatus();
    const std::string target = name.substr(kWhiteout.size());
    const std::string target_path = parent.empty() ? target : parent + "/" + target;
    if (target.empty() || target == "." || written_.contains(target_path)) {
      return absl::OkStatus();
    }
    return RemoveTreeAt(folder->get(), target);
  }

  // Clears what earlier layers left at `path` unless both are folders.
  absl::Status ClearPlace(const std::string& path, bool is_folder) {
    const auto [parent, name] = SplitParent(path);
    absl::StatusOr<UniqueFd> folder = OpenParent(root_fd_, parent, path);
    if (!folder.ok()) return folder.status();
    if (!folder->valid()) return absl::OkStatus();
    struct stat info {};
    if (::fstatat(folder->get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
      return absl::OkStatus();
    }
    if (is_folder && S_ISDIR(info.st_mode)) return absl::OkStatus();
    return RemoveTreeAt(folder->get(), name);
  }

  absl::Status Entry(archive* reader, archive* writer, archive_entry* entry) {
    const char* raw = archive_entry_pathname(entry);
    absl::StatusOr<std::string> path = CleanPath(raw != nullptr ? raw : "", "entry");
    if (!path.ok()) return Refused(path.status());
    if (path->empty()) return absl::OkStatus();  // the root itself
    const auto [parent, name] = SplitParent(*path);
    if (name.starts_with(kWhiteout)) {
      absl::Status status = Whiteout(parent, name, *path);
      return status.ok() ? status : Refused(status);
    }
    if (const char* link = archive_entry_hardlink(entry); link != nullptr) {
      absl::StatusOr<std::string> target = CleanPath(link, "hard link target");
      if (!target.ok()) return Refused(target.status());
      const auto [link_parent, link_name] = SplitParent(*target);
      absl::StatusOr<UniqueFd> folder = OpenParent(root_fd_, link_parent, *target);
      if (!folder.ok()) return Refused(folder.status());
      archive_entry_set_hardlink(entry, target->c_str());
    }
    const bool is_folder = archive_entry_filetype(entry) == AE_IFDIR;
    if (absl::Status status = ClearPlace(*path, is_folder); !status.ok()) return Refused(status);
    if (archive_entry_size_is_set(entry) != 0 && archive_entry_size(entry) > 0) {
      bytes_ += archive_entry_size(entry);
    }
    if (bytes_ > max_bytes_) {
      return absl::InvalidArgumentError(fmt::format(
          "layer {} unpacks to more than {} bytes; raise --max-cache-bytes or use a smaller image",
          layer_, max_bytes_));
    }
    archive_entry_set_pathname(entry, path->c_str());
    if (archive_write_header(writer, entry) < ARCHIVE_WARN) {
      return Failed(writer, *path);
    }
    if (archive_entry_size(entry) > 0) {
      const void* block = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      while (true) {
        const int got = archive_read_data_block(reader, &block, &size, &offset);
        if (got == ARCHIVE_EOF) break;
        if (got < ARCHIVE_WARN) {
          return absl::InvalidArgumentError(
              fmt::format("layer {} is cut short or corrupt at \"{}\": {}", layer_, Shown(*path),
                          ErrorText(reader)));
        }
        if (archive_write_data_block(writer, block, size, offset) < ARCHIVE_WARN) {
          return Failed(writer, *path);
        }
      }
    }
    if (archive_write_finish_entry(writer) < ARCHIVE_WARN) return Failed(writer, *path);
    MarkWritten(*path);
    return absl::OkStatus();
  }

  absl::Status Refused(const absl::Status& status) const {
    return absl::Status(status.code(), fmt::format("layer {}: {}", layer_, status.message()));
  }

  absl::Status Failed(archive* writer, const std::string& path) const {
    // libarchive's secure flags report an unsafe entry as a write failure.
    const int error = archive_errno(writer);
    const std::string text =
        fmt::format("layer {}: cannot write \"{}\": {}", layer_, Shown(path), ErrorText(writer));
    if (error == ENOSPC || error == EDQUOT || error == EIO || error == EROFS) {
      return absl::UnavailableError(text);
    }
    return absl::FailedPreconditionError(text);
  }

  int root_fd_;
  std::string layer_;
  std::int64_t max_bytes_;
  std::int64_t bytes_ = 0;
  std::set<std::string> written_;  // this layer's paths, with their folders
};

}  // namespace

absl::Status CheckLayerMediaType(std::string_view media_type) {
  if (media_type == "application/vnd.oci.image.layer.v1.tar" ||
      media_type == "application/vnd.oci.image.layer.v1.tar+gzip" ||
      media_type == "application/vnd.oci.image.layer.v1.tar+zstd" ||
      media_type == "application/vnd.docker.image.rootfs.diff.tar.gzip") {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(fmt::format(
      "unsupported media type \"{}\" for a layer; only tar layers (plain, gzip or zstd) can be "
      "extracted",
      Shown(media_type.substr(0, 120))));
}

absl::Status ExtractLayer(const std::string& layer_path, std::string_view name,
                          const std::string& rootfs, std::int64_t max_bytes) {
  const std::string layer(name);
  UniqueFd root(::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    return absl::UnavailableError(
        fmt::format("cannot open the root filesystem {}: {}", rootfs, std::strerror(errno)));
  }
  std::unique_ptr<archive, ArchiveReadDeleter> reader(archive_read_new());
  std::unique_ptr<archive, ArchiveWriteDeleter> writer(archive_write_disk_new());
  if (!reader || !writer) return absl::ResourceExhaustedError("libarchive is out of memory");
  archive_read_support_filter_gzip(reader.get());
  archive_read_support_filter_zstd(reader.get());
  archive_read_support_format_tar(reader.get());
  archive_write_disk_set_options(
      writer.get(), ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                        ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_UNLINK |
                        ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                        ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
  if (archive_read_open_filename(reader.get(), layer_path.c_str(), 1 << 20) != ARCHIVE_OK) {
    const char* text = archive_error_string(reader.get());
    return absl::InvalidArgumentError(fmt::format("layer {} is not a readable tar: {}", layer,
                                                  text != nullptr ? text : "unknown error"));
  }
  WorkingFolder restore;
  if (::fchdir(root.get()) != 0) {
    return absl::UnavailableError(
        fmt::format("cannot enter the root filesystem {}: {}", rootfs, std::strerror(errno)));
  }
  LayerWriter run(root.get(), layer, max_bytes);
  return run.Run(reader.get(), writer.get());
}

}  // namespace cohort::image
