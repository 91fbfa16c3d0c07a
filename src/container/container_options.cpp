// SPDX-License-Identifier: Apache-2.0
#include "cohort/container/container_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace cohort::container {
namespace {

constexpr std::string_view kMountForm =
    "write SRC:DST[:FLAGS] with absolute paths, entries joined by , and flags by + "
    "(e.g. /lustre/data:/data:ro,/scratch:/scratch)";

absl::Status Invalid(std::string_view option, std::string_view value, std::string_view why,
                     std::string_view fix) {
  return absl::InvalidArgumentError(fmt::format("{} {:?}: {}; {}", option, value, why, fix));
}

// `text` cut at each `separator`, at most `most` pieces (the last keeps the
// rest).
std::vector<std::string_view> Split(std::string_view text, char separator,
                                    std::size_t most = std::string_view::npos) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < most) {
    const std::size_t at = text.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.push_back(text);
  return parts;
}

bool HasDotDot(std::string_view path) {
  for (const std::string_view part : Split(path, '/')) {
    if (part == "..") return true;
  }
  return false;
}

// Sets one of pyxis's (enroot's) mount flags on `mount`; false for an
// unknown one.
bool ApplyFlag(std::string_view flag, Mount& mount) {
  if (flag == "ro") {
    mount.read_only = true;
  } else if (flag == "rw") {
    mount.read_only = false;
  } else if (flag == "bind") {
    mount.recursive = false;
  } else if (flag == "rbind") {
    mount.recursive = true;
  } else if (flag == "nosuid") {
    mount.nosuid = true;
  } else if (flag == "nodev") {
    mount.nodev = true;
  } else if (flag == "noexec") {
    mount.noexec = true;
  } else if (flag == "private" || flag == "rprivate" || flag == "slave" || flag == "rslave" ||
             flag == "shared" || flag == "rshared") {
    mount.propagation = std::string(flag);
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<Mount>> ParseMounts(std::string_view text) {
  std::vector<Mount> mounts;
  for (const std::string_view entry : Split(text, ',')) {
    if (entry.empty()) {
      return Invalid("--container-mounts", text, "has an empty entry", kMountForm);
    }
    if (static_cast<int>(mounts.size()) == kMaxMounts) {
      return Invalid("--container-mounts", text,
                     fmt::format("has more than {} entries", kMaxMounts),
                     "mount a common parent folder instead");
    }
    const std::vector<std::string_view> parts = Split(entry, ':', 3);
    Mount mount;
    mount.source = std::string(parts[0]);
    mount.target = std::string(parts.size() > 1 ? parts[1] : parts[0]);
    if (mount.source.empty() || mount.target.empty()) {
      return Invalid("--container-mounts", entry, "names no source or no target", kMountForm);
    }
    if (mount.source.size() > kMaxPath || mount.target.size() > kMaxPath) {
      return Invalid("--container-mounts", entry.substr(0, 64),
                     fmt::format("has a path over {} bytes", kMaxPath), kMountForm);
    }
    if (mount.source != "tmpfs" && !mount.source.starts_with('/') &&
        !mount.source.starts_with('.')) {
      return Invalid("--container-mounts", entry,
                     fmt::format("source {:?} is neither a path nor tmpfs", mount.source),
                     kMountForm);
    }
    if (!mount.target.starts_with('/')) {
      return Invalid("--container-mounts", entry,
                     fmt::format("target {:?} is not an absolute path", mount.target), kMountForm);
    }
    if (HasDotDot(mount.source) || HasDotDot(mount.target)) {
      return Invalid("--container-mounts", entry, "a path holds ..", "write the paths without ..");
    }
    if (parts.size() > 2 && !parts[2].empty()) {
      for (const std::string_view flag : Split(parts[2], '+')) {
        if (!ApplyFlag(flag, mount)) {
          return Invalid(
              "--container-mounts", entry, fmt::format("{:?} is no mount flag", flag),
              "use ro, rw, bind, rbind, nosuid, nodev, noexec, private, rprivate, slave, rslave, "
              "shared or rshared, joined by + (e.g. ro+nosuid)");
        }
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

std::string FormatMounts(const std::vector<Mount>& mounts) {
  std::vector<std::string> entries;
  for (const Mount& mount : mounts) {
    std::vector<std::string_view> flags;
    if (mount.read_only) flags.push_back("ro");
    if (!mount.recursive) flags.push_back("bind");
    if (mount.nosuid) flags.push_back("nosuid");
    if (mount.nodev) flags.push_back("nodev");
    if (mount.noexec) flags.push_back("noexec");
    if (!mount.propagation.empty()) flags.push_back(mount.propagation);
    entries.push_back(
        flags.empty() ? fmt::format("{}:{}", mount.source, mount.target)
                      : fmt::format("{}:{}:{}", mount.source, mount.target, fmt::join(flags, "+")));
  }
  return fmt::format("{}", fmt::join(entries, ","));
}

absl::StatusOr<ContainerName> ParseContainerName(std::string_view text) {
  constexpr std::string_view kForm =
      "write NAME[:auto|create|exec|no_exec|no_create], NAME of letters, digits, ., _ and - (e.g. "
      "train:auto)";
  const std::size_t colon = text.find(':');
  ContainerName parsed;
  parsed.name = std::string(text.substr(0, colon));
  const std::string_view mode = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (parsed.name.empty() || parsed.name.size() > 64 || parsed.name.starts_with('.') ||
      !std::all_of(parsed.name.begin(), parsed.name.end(), [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
      })) {
    return Invalid("--container-name", text, "is no container name", kForm);
  }
  if (mode.empty() || mode == "auto") {
    parsed.mode = NameMode::kAuto;
  } else if (mode == "create") {
    parsed.mode = NameMode::kCreate;
  } else if (mode == "exec") {
    parsed.mode = NameMode::kExec;
  } else if (mode == "no_exec") {
    parsed.mode = NameMode::kNoExec;
  } else if (mode == "no_create") {
    parsed.mode = NameMode::kNoCreate;
  } else {
    return Invalid("--container-name", text, fmt::format("{:?} is no flag", mode), kForm);
  }
  return parsed;
}

std::string_view NameModeText(NameMode mode) {
  switch (mode) {
    case NameMode::kAuto:
      return "auto";
    case NameMode::kCreate:
      return "create";
    case NameMode::kExec:
      return "exec";
    case NameMode::kNoExec:
      return "no_exec";
    case NameMode::kNoCreate:
      return "no_create";
  }
  return "auto";
}

absl::StatusOr<std::vector<std::string>> ParseEnvNames(std::string_view text) {
  std::vector<std::string> names;
  for (const std::string_view name : Split(text, ',')) {
    const bool valid = !name.empty() && name.size() <= 256 &&
                       std::isdigit(static_cast<unsigned char>(name[0])) == 0 &&
                       std::all_of(name.begin(), name.end(), [](unsigned char c) {
                         return std::isalnum(c) != 0 || c == '_';
                       });
    if (!valid) {
      return Invalid("--container-env", text, fmt::format("{:?} is no variable name", name),
                     "write NAME[,NAME...] (e.g. PATH,LD_LIBRARY_PATH)");
    }
    if (static_cast<int>(names.size()) == kMaxEnvNames) {
      return Invalid("--container-env", text.substr(0, 64),
                     fmt::format("names more than {} variables", kMaxEnvNames),
                     "name only those the image must not override");
    }
    names.emplace_back(name);
  }
  return names;
}

absl::Status CheckWorkdir(std::string_view path) {
  if (path.empty() || !path.starts_with('/') || path.size() > kMaxPath || HasDotDot(path)) {
    return Invalid("--container-workdir", path.substr(0, 64), "is no absolute path",
                   "write a path inside the container such as /workspace");
  }
  return absl::OkStatus();
}

absl::Status CheckSavePath(std::string_view path) {
  if (path.empty() || path.size() > kMaxPath || path.ends_with('/') ||
      path.find('\0') != std::string_view::npos) {
    return Invalid("--container-save", path.substr(0, 64), "is no file name",
                   "write the squashfs file to make, such as /scratch/$USER/trained.sqsh");
  }
  return absl::OkStatus();
}

}  // namespace cohort::container
