// SPDX-License-Identifier: Apache-2.0
#include "proc_stat.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <string>

namespace cohort::step {

std::optional<ProcessStat> ParseProcessStat(std::string_view text) {
  // "PID (COMM) STATE PPID …": COMM is whatever the process named itself, so
  // the fields start after the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  ProcessStat stat;
  // Fields from 3 (state) on; start_time is field 22.
  for (int field = 3; field <= 22; ++field) {
    while (rest.starts_with(' ')) rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view word = rest.substr(0, end);
    if (word.empty()) return std::nullopt;
    if (field == 3) {
      if (word.size() != 1) return std::nullopt;
      stat.state = word.front();
    } else if (field == 22) {
      const auto [ptr, error] =
          std::from_chars(word.data(), word.data() + word.size(), stat.start_time);
      if (error != std::errc() || ptr != word.data() + word.size()) return std::nullopt;
    }
    rest.remove_prefix(end);
  }
  return stat;
}

std::optional<ProcessStat> ReadProcessStat(pid_t pid) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::array<char, 1024> buffer{};
  std::size_t length = 0;
  while (length < buffer.size()) {
    const ssize_t n = ::read(fd, buffer.data() + length, buffer.size() - length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    length += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return ParseProcessStat(std::string_view(buffer.data(), length));
}

bool ProcessAlive(pid_t pid, std::int64_t start_time) {
  if (pid <= 0) return false;
  const std::optional<ProcessStat> stat = ReadProcessStat(pid);
  if (!stat) {
    // Without /proc (start_time 0 says the stepd could not read it either)
    // the pid is all there is to go by.
    return start_time == 0 && (::kill(pid, 0) == 0 || errno == EPERM);
  }
  return stat->start_time == start_time && stat->state != 'Z' && stat->state != 'X';
}

}  // namespace cohort::step
