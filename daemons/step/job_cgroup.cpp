// SPDX-License-Identifier: Apache-2.0
#include "job_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <thread>

#include "device_filter.h"

namespace cohort::step {
namespace {

// Whether no process is left in the folder or below: cgroup.events (v2),
// else an empty cgroup.procs (v1, whose launch folders have no children).
bool Unpopulated(const std::string& folder) {
  if (const std::optional<std::string> events = ReadSmallFile(folder + "/cgroup.events")) {
    return events->find("populated 0") != std::string::npos;
  }
  const std::optional<std::string> procs = ReadSmallFile(folder + "/cgroup.procs");
  return !procs || procs->find_first_not_of(" \n") == std::string::npos;
}

// The text of a cgroup file without its trailing newline; empty when it
// cannot be read.
std::string ReadValue(const std::string& path) {
  std::string text = ReadSmallFile(path).value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string Parent(const std::string& folder) { return folder.substr(0, folder.rfind('/')); }

}  // namespace

std::optional<std::string> UnifiedCgroupPath(std::string_view text) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    if (line.starts_with("0::")) return std::string(line.substr(3));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

std::optional<std::string> V1CgroupPath(std::string_view text, std::string_view controller) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    // hierarchy-ID:controller-list:path
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second != std::string_view::npos) {
      std::string_view list = line.substr(first + 1, second - first - 1);
      while (!list.empty()) {
        const std::size_t comma = list.find(',');
        if (list.substr(0, comma) == controller) return std::string(line.substr(second + 1));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::string AgentCgroupName(std::string_view spool_dir) {
  std::uint32_t hash = 2166136261U;  // FNV-1a
  for (const char c : spool_dir) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619U;
  }
  return fmt::format("cohort-{:08x}", hash);
}

std::string DeviceRule(dev_t device) {
  return fmt::format("c {}:{} rwm", major(device), minor(device));
}

std::string CgroupBase(std::string_view mount, std::string_view own) {
  std::string path(own);
  while (path.size() > 1 && path.ends_with('/')) path.pop_back();
  const std::size_t slash = path.rfind('/');
  if (slash != std::string::npos && std::string_view(path).substr(slash + 1) == kAgentCgroupLeaf) {
    path.resize(slash);
  }
  if (path == "/") path.clear();
  return fmt::format("{}{}", mount, path);
}

std::string LaunchCgroupFolder(std::string_view base, std::string_view node, std::int64_t job_id,
                               int attempt, int step) {
  if (step < 0) return fmt::format("{}/{}/cohort-job-{}.{}", base, node, job_id, attempt);
  return fmt::format("{}/{}/cohort-job-{}.{}.{}", base, node, job_id, attempt, step);
}

std::string MemoryMaxValue(std::int64_t memory_mb) {
  constexpr std::int64_t kBytesPerMb = 1024 * 1024;
  if (memory_mb <= 0 || memory_mb > std::numeric_limits<std::int64_t>::max() / kBytesPerMb) {
    return "max";
  }
  return std::to_string(memory_mb * kBytesPerMb);
}

absl::Status CreateCgroup(const CgroupTree& tree, const std::string& folder) {
  if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("cannot create {}: {}", folder, std::strerror(errno)));
  }
  if (tree.controller != "cpuset") return absl::OkStatus();
  for (const char* file : {"/cpuset.cpus", "/cpuset.mems"}) {
    if (!ReadValue(folder + file).empty()) continue;
    if (absl::Status copied = WriteCgroupFile(folder + file, ReadValue(Parent(folder) + file));
        !copied.ok()) {
      return copied;
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyLimits(const CgroupTree& tree, const std::string& folder,
                         const LaunchLimits& limits) {
  const bool v2 = tree.controller.empty();
  if (v2 || tree.controller == "memory") {
    std::string value = MemoryMaxValue(limits.memory_mb);
    if (!v2 && value == "max") value = "-1";
    if (absl::Status written =
            WriteCgroupFile(folder + (v2 ? "/memory.max" : "/memory.limit_in_bytes"), value);
        !written.ok()) {
      return written;
    }
  }
  const std::string cpus = folder + "/cpuset.cpus";
  if ((tree.controller == "cpuset" || (v2 && ::access(cpus.c_str(), F_OK) == 0)) &&
      !limits.cpus.empty()) {
    if (absl::Status written =
            WriteCgroupFile(cpus, fmt::format("{}", fmt::join(limits.cpus, ",")));
        !written.ok()) {
      return written;
    }
  }
  if (tree.controller == "devices") {
    for (const dev_t device : limits.denied_devices) {
      if (absl::Status written = WriteCgroupFile(folder + "/devices.deny", DeviceRule(device));
          !written.ok()) {
        return written;
      }
    }
  }
  if (v2) return AttachDeviceFilter(folder, limits.denied_devices);
  return absl::OkStatus();
}

absl::Status WriteCgroupFile(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  ssize_t written = 0;
  do {
    written = ::write(fd, text.data(), text.size());
  } while (written < 0 && errno == EINTR);
  const int error = written < 0 ? errno : 0;
  ::close(fd);
  if (error != 0) {
    return absl::Status(absl::ErrnoToStatusCode(error),
                        fmt::format("cannot write {:?} to {}: {}", text, path, std::strerror(error)));
  }
  return absl::OkStatus();
}

void KillCgroup(const std::string& folder) {
  if (WriteCgroupFile(folder + "/cgroup.kill", "1").ok()) return;
  // Older kernels: kill what is listed. A process forking meanwhile may
  // escape one round; RemoveCgroup calls this until the folder is empty.
  const std::optional<std::string> procs = ReadSmallFile(folder + "/cgroup.procs");
  if (!procs) return;
  std::string_view rest = *procs;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    pid_t pid = 0;
    const auto parsed = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (parsed.ec == std::errc() && pid > 0) ::kill(pid, SIGKILL);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
}

absl::Status RemoveCgroup(const std::string& folder, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    if (::rmdir(folder.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
    const int error = errno;
    if (error == EBUSY && !Unpopulated(folder)) KillCgroup(folder);
    if (error != EBUSY || std::chrono::steady_clock::now() >= deadline) {
      return absl::Status(absl::ErrnoToStatusCode(error),
                          fmt::format("cannot remove cgroup {}: {}", folder, std::strerror(error)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace cohort::step
