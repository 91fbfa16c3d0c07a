// SPDX-License-Identifier: Apache-2.0
#include "rank_spawner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace cohort::step {
namespace {

absl::Status Failure(absl::StatusCode code, const std::string& node, std::string_view text) {
  return absl::Status(code, fmt::format("{}: {}", node, text));
}

absl::Status ErrnoFailure(int error, const std::string& node, std::string_view what) {
  return Failure(absl::ErrnoToStatusCode(error), node,
                 fmt::format("{}: {}", what, std::strerror(error)));
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (name.starts_with('/') || dir.empty()) return std::string(name);
  if (dir.ends_with('/')) return fmt::format("{}{}", dir, name);
  return fmt::format("{}/{}", dir, name);
}

// execvp's search, but over the job's PATH and relative to the job's folder:
// a user's `python` must be the one their environment names, not the stepd's.
absl::StatusOr<std::string> FindProgram(const std::string& name, std::string_view path,
                                        const std::string& work_dir, const std::string& node) {
  const std::string what = fmt::format("cannot run \"{}\"", name);
  if (name.empty()) return Failure(absl::StatusCode::kInvalidArgument, node, what + ": empty name");
  // A name with a slash is not searched; the child resolves it in work_dir.
  if (name.find('/') != std::string::npos) return name;
  bool denied = false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t colon = std::min(path.find(':', start), path.size());
    const std::string_view dir = path.substr(start, colon - start);
    start = colon + 1;
    const std::string candidate = JoinPath(JoinPath(work_dir, dir.empty() ? "." : dir), name);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    denied = true;
  }
  return ErrnoFailure(denied ? EACCES : ENOENT, node, what);
}

absl::Status CheckWorkDir(const std::string& dir, const std::string& node) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    return ErrnoFailure(errno, node, fmt::format("working directory {}", dir));
  }
  if (!S_ISDIR(info.st_mode)) {
    return Failure(absl::StatusCode::kFailedPrecondition, node,
                   fmt::format("working directory {} is not a directory", dir));
  }
  return absl::OkStatus();
}

// The output files of one launch, each opened once however many ranks share it.
class OutputFiles {
 public:
  explicit OutputFiles(OpenMode mode) : mode_(mode) {}
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles() {
    for (const auto& [path, fd] : fds_) ::close(fd);
  }

  absl::StatusOr<int> Open(const std::string& path, std::string_view role,
                           const std::string& node) {
    if (const auto it = fds_.find(path); it != fds_.end()) return it->second;
    const int how = mode_ == OpenMode::kTruncate ? O_TRUNC : O_APPEND;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | how | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) return ErrnoFailure(errno, node, fmt::format("cannot open {} file {}", role, path));
    fds_.emplace(path, fd);
    return fd;
  }

 private:
  OpenMode mode_;
  std::map<std::string, int> fds_;
};

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// What a child tells its parent through the pipe when it cannot exec.
enum class ChildStep : int { kChdir, kStdin, kExec };
struct ChildError {
  ChildStep step = ChildStep::kExec;
  int error = 0;
};

// Where the child's report pipe ends up once stdio is in place; every
// descriptor above it is closed.
constexpr int kReportFd = STDERR_FILENO + 1;

[[noreturn]] void ChildFails(int report_fd, ChildStep step) {
  const ChildError report{step, errno};
  // Best effort: a parent that reads nothing sees a successful exec and then
  // the rank's exit 127.
  (void)!::write(report_fd, &report, sizeof report);
  ::_exit(127);
}

// Runs in the child between fork and exec. The stepd is single-threaded, so
// anything may be called here. The stepd keeps 0-2 open, so every other
// descriptor it passes is above 2.
[[noreturn]] void ExecRank(pid_t group, int report_fd, int out, int err,
                           const std::string& work_dir, const std::string& program,
                           char* const argv[], char* const env[]) {
  ::setpgid(0, group);
  // Whatever the stepd inherited is no business of a rank.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal = 1; signal < NSIG; ++signal) ::sigaction(signal, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (::chdir(work_dir.c_str()) != 0) ChildFails(report_fd, ChildStep::kChdir);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) ChildFails(report_fd, ChildStep::kStdin);
  if (::dup2(null, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0) {
    ChildFails(report_fd, ChildStep::kStdin);
  }
  if (report_fd != kReportFd) {
    // Whatever held kReportFd is closed below anyway.
    if (::dup3(report_fd, kReportFd, O_CLOEXEC) < 0) ChildFails(report_fd, ChildStep::kStdin);
  }
  // Nothing of the stepd's (the event file, the agent's socket) leaks into a
  // rank, close-on-exec or not; the report pipe closes on exec.
  ::closefrom(kReportFd + 1);
  ::execve(program.c_str(), argv, env);
  ChildFails(kReportFd, ChildStep::kExec);
}

}  // namespace

SpawnResult SpawnRanks(const LaunchFile& file,
                       const std::function<void(const RankStartedEvent&)>& on_started) {
  SpawnResult result;
  const std::string& node = file.node;
  result.status = CheckWorkDir(file.work_dir, node);
  if (!result.status.ok()) return result;

  std::string program;
  std::vector<std::string> argv;
  std::string shown;  // the program as the user wrote it, for messages
  if (!file.script_path.empty()) {
    program = file.script_path;
    shown = fmt::format("batch script {}", file.argv.empty() ? program : file.argv.front());
    argv.push_back(program);
    if (!file.argv.empty()) argv.insert(argv.end(), file.argv.begin() + 1, file.argv.end());
  } else if (file.argv.empty()) {
    result.status = Failure(absl::StatusCode::kInvalidArgument, node,
                            "nothing to run: the launch has neither a program nor a script");
    return result;
  } else {
    absl::StatusOr<std::string> found =
        FindProgram(file.argv.front(), file.search_path, file.work_dir, node);
    if (!found.ok()) {
      result.status = found.status();
      return result;
    }
    program = *std::move(found);
    shown = fmt::format("\"{}\"", file.argv.front());
    argv = file.argv;
  }
  std::vector<char*> argv_pointers = Pointers(argv);

  OutputFiles files(file.open_mode);
  for (const RankLaunch& rank : file.ranks) {
    absl::StatusOr<int> out = files.Open(rank.output, "output", node);
    if (!out.ok()) {
      result.status = out.status();
      return result;
    }
    absl::StatusOr<int> err = *out;
    if (!rank.error.empty()) {
      err = files.Open(rank.error, "error", node);
      if (!err.ok()) {
        result.status = err.status();
        return result;
      }
    }
    std::vector<std::string> env = rank.env;
    std::vector<char*> env_pointers = Pointers(env);

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
      result.status = ErrnoFailure(errno, node, "cannot create a pipe");
      return result;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      ExecRank(result.process_group, report[1], *out, *err, file.work_dir, program,
               argv_pointers.data(), env_pointers.data());
    }
    const int fork_error = errno;
    ::close(report[1]);
    if (pid < 0) {
      ::close(report[0]);
      result.status = ErrnoFailure(fork_error, node, fmt::format("cannot start {}", shown));
      return result;
    }
    // Both sides set the group, so it exists whichever runs first.
    ::setpgid(pid, result.process_group == 0 ? pid : result.process_group);

    ChildError child_error;
    ssize_t got = 0;
    do {
      got = ::read(report[0], &child_error, sizeof child_error);
    } while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got == static_cast<ssize_t>(sizeof child_error)) {
      // The child is gone: reap it here, it never ran as a rank.
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      switch (child_error.step) {
        case ChildStep::kChdir:
          result.status = ErrnoFailure(child_error.error, node,
                                       fmt::format("working directory {}", file.work_dir));
          break;
        case ChildStep::kStdin:
          result.status = ErrnoFailure(child_error.error, node,
                                       fmt::format("cannot set up the stdio of {}", shown));
          break;
        case ChildStep::kExec:
          if (child_error.error == ENOEXEC && !file.script_path.empty()) {
            result.status = Failure(
                absl::StatusCode::kFailedPrecondition, node,
                fmt::format("cannot run {}: its first line must be #! and an interpreter", shown));
          } else {
            result.status =
                ErrnoFailure(child_error.error, node, fmt::format("cannot run {}", shown));
          }
          break;
      }
      return result;
    }
    if (result.process_group == 0) result.process_group = pid;
    const RankStartedEvent started{rank.rank, pid};
    result.started.push_back(started);
    on_started(started);
  }
  return result;
}

}  // namespace cohort::step
