// SPDX-License-Identifier: Apache-2.0
#include "process_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort::agent {
namespace {

constexpr std::string_view kDefaultOutput = "cohort-%j.out";
// What execvp searches when the environment has no PATH.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

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

std::string_view JobPathVariable(const launch::LaunchContext& context) {
  std::string_view path = kDefaultPath;
  for (const launch::EnvVar& var : context.base_env) {
    if (var.name == "PATH") path = var.value;
  }
  return path;
}

// execvp's search, but over the job's PATH and relative to the job's folder:
// a user's `python` must be the one their environment names, not the agent's.
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

absl::Status WriteScript(const std::string& path, std::string_view text, const std::string& node) {
  const std::string what = fmt::format("cannot write the batch script {}", path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0700);
  if (fd < 0) return ErrnoFailure(errno, node, what);
  // The umask may have taken the execute bits the mode asked for.
  int error = ::fchmod(fd, 0700) == 0 ? 0 : errno;
  while (error == 0 && !text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno != EINTR) error = errno;
      continue;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) return ErrnoFailure(error, node, what);
  return absl::OkStatus();
}

// The output files of one launch, each opened once however many ranks share it.
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles() {
    for (const auto& [path, fd] : fds_) ::close(fd);
  }

  absl::StatusOr<int> Open(const std::string& path, std::string_view role,
                           const std::string& node) {
    if (const auto it = fds_.find(path); it != fds_.end()) return it->second;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) return ErrnoFailure(errno, node, fmt::format("cannot open {} file {}", role, path));
    fds_.emplace(path, fd);
    return fd;
  }

 private:
  std::map<std::string, int> fds_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() {
    ::posix_spawnattr_init(&attr_);
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    // The agent's handlers and mask (Asio's, gRPC's) are no business of a rank.
    ::posix_spawnattr_setsigmask(&attr_, &none);
    ::posix_spawnattr_setsigdefault(&attr_, &all);
    ::posix_spawnattr_setflags(
        &attr_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attr_); }

  void SetProcessGroup(pid_t group) { ::posix_spawnattr_setpgroup(&attr_, group); }
  [[nodiscard]] const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_{};
};

class FileActions {
 public:
  FileActions() { ::posix_spawn_file_actions_init(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  ~FileActions() { ::posix_spawn_file_actions_destroy(&actions_); }

  [[nodiscard]] posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

absl::Status CheckPlan(const LaunchPlan& plan) {
  const launch::LaunchContext& context = plan.context;
  const std::string& node = context.node_name;
  if (context.tasks_per_node < 1 || context.tasks_per_node > kMaxRanksPerNode) {
    return Failure(absl::StatusCode::kInvalidArgument, node,
                   fmt::format("the launch asks for {} ranks per node; a node runs 1 to {}",
                               context.tasks_per_node, kMaxRanksPerNode));
  }
  if (context.num_nodes < 1 || context.node_rank < 0 || context.node_rank >= context.num_nodes) {
    return Failure(absl::StatusCode::kInvalidArgument, node,
                   fmt::format("node rank {} is outside a gang of {} nodes", context.node_rank,
                               context.num_nodes));
  }
  if (static_cast<std::int64_t>(context.num_nodes) * context.tasks_per_node > INT_MAX) {
    return Failure(absl::StatusCode::kInvalidArgument, node,
                   fmt::format("{} nodes of {} ranks is more ranks than a job can have",
                               context.num_nodes, context.tasks_per_node));
  }
  if (plan.argv.empty() && plan.script.empty()) {
    return Failure(absl::StatusCode::kInvalidArgument, node,
                   "nothing to run: the launch has neither a program nor a script");
  }
  return absl::OkStatus();
}

absl::Status CheckWorkDir(const std::string& dir, const std::string& node) {
  struct stat info {};
  if (dir.empty()) {
    return Failure(absl::StatusCode::kInvalidArgument, node, "the launch has no working directory");
  }
  if (::stat(dir.c_str(), &info) != 0) {
    return ErrnoFailure(errno, node, fmt::format("working directory {}", dir));
  }
  if (!S_ISDIR(info.st_mode)) {
    return Failure(absl::StatusCode::kFailedPrecondition, node,
                   fmt::format("working directory {} is not a directory", dir));
  }
  return absl::OkStatus();
}

}  // namespace

ProcessLauncher::ProcessLauncher(std::string spool_dir) : spool_dir_(std::move(spool_dir)) {}

absl::Status ProcessLauncher::PrepareSpool() const {
  if (::mkdir(spool_dir_.c_str(), 0700) == 0) return absl::OkStatus();
  const int error = errno;
  if (error != EEXIST) {
    return absl::Status(absl::ErrnoToStatusCode(error),
                        fmt::format("cannot create spool folder {}: {}; pass --spool DIR",
                                    spool_dir_, std::strerror(error)));
  }
  // Scripts run from here: a folder someone else controls could swap them.
  struct stat info {};
  if (::lstat(spool_dir_.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "spool {} exists and is not a folder; remove it or pass --spool DIR", spool_dir_));
  }
  if (info.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(fmt::format(
        "spool folder {} is owned by uid {}, not by this user (uid {}); remove it or pass --spool "
        "DIR",
        spool_dir_, info.st_uid, ::geteuid()));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(fmt::format(
        "spool folder {} is writable by others (mode {:o}); chmod 700 it or pass --spool DIR",
        spool_dir_, info.st_mode & 07777));
  }
  return absl::OkStatus();
}

void ProcessLauncher::RemoveScript(const std::string& path) {
  if (!path.empty()) ::unlink(path.c_str());
}

SpawnResult ProcessLauncher::Spawn(const LaunchPlan& plan) const {
  SpawnResult result;
  const launch::LaunchContext& context = plan.context;
  const std::string& node = context.node_name;
  result.status = CheckPlan(plan);
  if (result.status.ok()) result.status = CheckWorkDir(plan.work_dir, node);
  if (!result.status.ok()) return result;

  std::string program;
  std::vector<std::string> argv;
  std::string shown;  // the program as the user wrote it, for messages
  if (!plan.script.empty()) {
    program = JoinPath(spool_dir_, fmt::format("job-{}-{}.sh", context.job_id, node));
    result.status = WriteScript(program, plan.script, node);
    if (!result.status.ok()) return result;
    result.script_path = program;
    shown = fmt::format("batch script {}", plan.argv.empty() ? program : plan.argv.front());
    argv.push_back(program);
    if (!plan.argv.empty()) argv.insert(argv.end(), plan.argv.begin() + 1, plan.argv.end());
  } else {
    absl::StatusOr<std::string> found =
        FindProgram(plan.argv.front(), JobPathVariable(context), plan.work_dir, node);
    if (!found.ok()) {
      result.status = found.status();
      return result;
    }
    program = *std::move(found);
    shown = fmt::format("\"{}\"", plan.argv.front());
    argv = plan.argv;
  }
  std::vector<char*> argv_pointers = Pointers(argv);

  const std::string output_pattern =
      plan.output.empty() ? std::string(kDefaultOutput) : plan.output;
  OutputFiles files;
  SpawnAttributes attributes;
  const auto fail = [&](absl::Status status) {
    // All or none: a gang with a rank missing cannot make progress.
    if (result.process_group > 0) ::killpg(result.process_group, SIGKILL);
    result.status = std::move(status);
    return result;
  };

  for (int local = 0; local < context.tasks_per_node; ++local) {
    const int rank = context.node_rank * context.tasks_per_node + local;
    const std::string out_path =
        JoinPath(plan.work_dir, launch::ExpandOutputPattern(output_pattern, context, rank));
    absl::StatusOr<int> out = files.Open(out_path, "output", node);
    if (!out.ok()) return fail(out.status());
    absl::StatusOr<int> err = *out;
    if (!plan.error.empty()) {
      err = files.Open(
          JoinPath(plan.work_dir, launch::ExpandOutputPattern(plan.error, context, rank)), "error",
          node);
      if (!err.ok()) return fail(err.status());
    }

    FileActions actions;
    ::posix_spawn_file_actions_addchdir_np(actions.get(), plan.work_dir.c_str());
    ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(actions.get(), *out, STDOUT_FILENO);
    ::posix_spawn_file_actions_adddup2(actions.get(), *err, STDERR_FILENO);
    // Nothing of the agent's (sockets, pipes) leaks into a rank, CLOEXEC or not.
    ::posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
    attributes.SetProcessGroup(result.process_group);

    std::vector<std::string> env = launch::BuildRankEnvironment(context, local);
    std::vector<char*> env_pointers = Pointers(env);
    pid_t pid = 0;
    const int error = ::posix_spawn(&pid, program.c_str(), actions.get(), attributes.get(),
                                    argv_pointers.data(), env_pointers.data());
    if (error != 0) {
      std::string what = fmt::format("cannot run {}", shown);
      if (error == ENOEXEC && !plan.script.empty()) {
        return fail(Failure(absl::StatusCode::kFailedPrecondition, node,
                            what + ": its first line must be #! and an interpreter"));
      }
      return fail(ErrnoFailure(error, node, what));
    }
    if (result.process_group == 0) result.process_group = pid;
    result.ranks.push_back({rank, pid});
  }
  return result;
}

}  // namespace cohort::agent
