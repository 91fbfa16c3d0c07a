// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

/// What processes use, from /proc: each rank's CPU time and resident
/// memory with its descendants', for the samples of what launches use
/// (sstat), as Slurm's jobacct_gather/linux reads them.
namespace cohort::agent {

/// What /proc/PID/stat says of one process that matters here.
struct ProcessUsage {
  pid_t ppid = 0;
  /// utime + stime + cutime + cstime: its own CPU time and that of the
  /// children it reaped, in clock ticks.
  std::int64_t cpu_ticks = 0;
  std::int64_t rss_pages = 0;
};

/// Parses the text of /proc/PID/stat (the command name in parentheses may
/// hold spaces and parentheses itself). Pure; nullopt when malformed.
[[nodiscard]] std::optional<ProcessUsage> ParseProcessUsage(std::string_view text);

/// A process and its descendants together.
struct TreeUsage {
  std::int64_t cpu_ms = 0;
  std::int64_t rss_kb = 0;
};

/// Every process of the machine at one moment. One scan of /proc serves
/// every launch of a sample.
class ProcessTable {
 public:
  /// Reads /proc (or `proc`, a folder laid out as it); processes that end
  /// while it reads are left out.
  [[nodiscard]] static ProcessTable Read(const std::string& proc = "/proc");

  /// Adds one process (Read's work; tests build tables by hand).
  void Add(pid_t pid, const ProcessUsage& usage);
  /// `root` and every process under it, with `tick_ms` milliseconds a
  /// clock tick and `page_kb` kB a page; zero when `root` is not in the
  /// table (it ended).
  [[nodiscard]] TreeUsage Subtree(pid_t root, double tick_ms, std::int64_t page_kb) const;
  [[nodiscard]] std::size_t Size() const { return processes_.size(); }

  /// This machine's clock tick (ms) and page size (kB).
  [[nodiscard]] static double TickMs();
  [[nodiscard]] static std::int64_t PageKb();

 private:
  std::unordered_map<pid_t, ProcessUsage> processes_;
  std::unordered_map<pid_t, std::vector<pid_t>> children_;
};

}  // namespace cohort::agent
