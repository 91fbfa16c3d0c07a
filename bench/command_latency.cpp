// SPDX-License-Identifier: Apache-2.0
// command_latency RUNS COMMAND [ARGS...]: runs COMMAND RUNS times, one after
// another, and prints the wall time of each run from its start (posix_spawn)
// to its exit as JSON: {"runs": N, "failures": F, "p50_ms": ..., "p99_ms":
// ..., "max_ms": ...}. Its output goes to /dev/null. Timing from a shell
// adds the shell's own fork to every run (2-5 ms on a small VM), or, with
// `date` before and after, the start of `date`; this times the command alone,
// as `perf stat` or hyperfine would. With COMMAND_LATENCY_LOG=FILE set, each
// run's start (wall clock, ms since the epoch) and duration go to FILE, one
// line each, to be set beside a daemon's log.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[static_cast<std::size_t>(static_cast<double>(sorted.size() - 1) * p)];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  if (argc < 3 ||
      std::from_chars(argv[1], argv[1] + std::strlen(argv[1]), runs).ec != std::errc() ||
      runs < 1) {
    std::fprintf(stderr, "usage: command_latency RUNS COMMAND [ARGS...]  (RUNS >= 1)\n");
    return 2;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<double> ms;
  int failures = 0;
  std::FILE* log = nullptr;
  if (const char* path = std::getenv("COMMAND_LATENCY_LOG"); path != nullptr) {
    log = std::fopen(path, "w");
    if (log == nullptr) {
      std::fprintf(stderr, "command_latency: cannot write %s: %s\n", path, std::strerror(errno));
      return 1;
    }
  }
  for (int i = 0; i < runs; ++i) {
    const auto started_at = std::chrono::system_clock::now();
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = 0;
    if (const int error = posix_spawnp(&pid, argv[2], &actions, nullptr, argv + 2, environ);
        error != 0) {
      std::fprintf(stderr, "command_latency: cannot start %s: %s\n", argv[2], std::strerror(error));
      return 1;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const auto end = std::chrono::steady_clock::now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    if (log != nullptr) {
      std::fprintf(log, "%lld %.2f\n",
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              started_at.time_since_epoch())
                                              .count()),
                   ms.back());
    }
  }
  if (log != nullptr) std::fclose(log);
  posix_spawn_file_actions_destroy(&actions);
  std::sort(ms.begin(), ms.end());
  std::printf(
      "{\"runs\": %d, \"failures\": %d, \"p50_ms\": %.2f, \"p99_ms\": %.2f, \"max_ms\": %.2f}\n",
      runs, failures, Percentile(ms, 0.50), Percentile(ms, 0.99), ms.back());
  return failures == 0 ? 0 : 1;
}
