// SPDX-License-Identifier: Apache-2.0
#include "process_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <memory>
#include <unordered_set>

namespace cohort::agent {
namespace {

// Fields of /proc/PID/stat, counted from 1 (proc(5)): after the command
// name, field 3 (state) is the first.
constexpr int kPpidField = 4;
constexpr int kUtimeField = 14;
constexpr int kCstimeField = 17;
constexpr int kRssField = 24;

// /proc/PID/stat is one line well under this; more is not a stat line.
constexpr std::size_t kStatBytes = 4096;

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

// The file's first kStatBytes, or nothing where it cannot be read. A
// process that exits between the open and the read fails the read with
// ESRCH: that is an answer here, never an exception (libstdc++'s filebuf
// throws on a failed read, and the agent must outlive its ranks).
std::string ReadStat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text(kStatBytes, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) size = 0;
      break;
    }
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(size);
  return text;
}

}  // namespace

std::optional<ProcessUsage> ParseProcessUsage(std::string_view text) {
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  ProcessUsage usage;
  int field = 2;  // the command name
  while (field < kRssField) {
    const std::size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(start);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view word = rest.substr(0, end);
    rest.remove_prefix(end);
    ++field;
    if (field != kPpidField && (field < kUtimeField || field > kCstimeField) &&
        field != kRssField) {
      continue;
    }
    std::int64_t number = 0;
    const auto [at, error] = std::from_chars(word.data(), word.data() + word.size(), number);
    if (error != std::errc() || at != word.data() + word.size()) return std::nullopt;
    if (field == kPpidField) {
      usage.ppid = static_cast<pid_t>(number);
    } else if (field == kRssField) {
      usage.rss_pages = std::max<std::int64_t>(number, 0);
    } else {
      usage.cpu_ticks += std::max<std::int64_t>(number, 0);
    }
  }
  return usage;
}

ProcessTable ProcessTable::Read(const std::string& proc) {
  ProcessTable table;
  const std::unique_ptr<DIR, DirCloser> dir(::opendir(proc.c_str()));
  if (!dir) return table;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string_view name = entry->d_name;
    pid_t pid = 0;
    const auto [at, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error != std::errc() || at != name.data() + name.size() || pid <= 0) continue;
    const std::string text = ReadStat(proc + "/" + std::string(name) + "/stat");
    if (const std::optional<ProcessUsage> usage = ParseProcessUsage(text)) table.Add(pid, *usage);
  }
  return table;
}

void ProcessTable::Add(pid_t pid, const ProcessUsage& usage) {
  if (!processes_.emplace(pid, usage).second) return;
  children_[usage.ppid].push_back(pid);
}

TreeUsage ProcessTable::Subtree(pid_t root, double tick_ms, std::int64_t page_kb) const {
  TreeUsage tree;
  if (!processes_.contains(root)) return tree;
  std::int64_t ticks = 0;
  std::int64_t pages = 0;
  // Each pid is visited once however its parents read (a pid reused while
  // /proc was read can make a loop of parents).
  std::vector<pid_t> todo{root};
  std::unordered_set<pid_t> seen{root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    const ProcessUsage& usage = processes_.at(pid);
    ticks += usage.cpu_ticks;
    pages += usage.rss_pages;
    if (const auto kids = children_.find(pid); kids != children_.end()) {
      for (const pid_t kid : kids->second) {
        if (seen.insert(kid).second) todo.push_back(kid);
      }
    }
  }
  tree.cpu_ms = static_cast<std::int64_t>(static_cast<double>(ticks) * tick_ms);
  tree.rss_kb = pages * page_kb;
  return tree;
}

double ProcessTable::TickMs() {
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? 1000.0 / static_cast<double>(ticks) : 10.0;
}

std::int64_t ProcessTable::PageKb() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? page / 1024 : 4;
}

}  // namespace cohort::agent
