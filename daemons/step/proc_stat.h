// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

/// Telling one process from another that later got the same pid.
namespace cohort::step {

/// What /proc/PID/stat says of a process that matters here.
struct ProcessStat {
  char state = '?';             ///< R, S, D, Z (zombie), X (dead), …
  std::int64_t start_time = 0;  ///< field 22: clock ticks after boot when it started
};

/// Parses the text of /proc/PID/stat (the command name in parentheses may
/// hold spaces and parentheses itself). Pure; nullopt when malformed.
[[nodiscard]] std::optional<ProcessStat> ParseProcessStat(std::string_view text);

/// Reads /proc/PID/stat; nullopt when there is no such process (or no /proc).
[[nodiscard]] std::optional<ProcessStat> ReadProcessStat(pid_t pid);

/// Whether `pid` is still the process that started at `start_time` and has
/// not exited (a zombie has). Without /proc, a start time of 0 (unknown)
/// trusts the pid alone.
[[nodiscard]] bool ProcessAlive(pid_t pid, std::int64_t start_time);

}  // namespace cohort::step
