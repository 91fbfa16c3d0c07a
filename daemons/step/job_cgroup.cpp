// SPDX-License-Identifier: Apache-2.0
#include "job_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <thread>

namespace cohort::step {
namespace {

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

// Whether cgroup.events says no process is left in the folder or below.
bool Unpopulated(const std::string& folder) {
  const std::optional<std::string> events = ReadSmallFile(folder + "/cgroup.events");
  if (!events) return true;  // gone
  return events->find("populated 0") != std::string::npos;
}

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
