// SPDX-License-Identifier: Apache-2.0
#include "rank_spawner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "cohort/launch/resource_limits.h"
#include "pmi_host.h"
#include "run_as.h"

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
// Runs in the child, as the rank's user: 0 and the program's path in
// `found`, or the errno to report.
int FindProgram(const std::string& name, std::string_view path, const std::string& work_dir,
                std::string& found) {
  if (name.empty()) return ENOENT;
  // A name with a slash is not searched; exec resolves it in work_dir.
  if (name.find('/') != std::string::npos) {
    found = name;
    return 0;
  }
  bool denied = false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t colon = std::min(path.find(':', start), path.size());
    const std::string_view dir = path.substr(start, colon - start);
    start = colon + 1;
    std::string candidate = JoinPath(JoinPath(work_dir, dir.empty() ? "." : dir), name);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (::access(candidate.c_str(), X_OK) == 0) {
      found = std::move(candidate);
      return 0;
    }
    denied = true;
  }
  return denied ? EACCES : ENOENT;
}

// mkdir -p: 0, or the errno of the first folder that could not be made.
int MakeFolders(const std::string& path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    if (slash == std::string::npos) return 0;
  }
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// What a child tells its parent through the pipe when it cannot exec.
enum class ChildStep : int {
  kCgroup,
  kCpuBind,
  kMemBind,
  kIdentity,
  kContainer,
  kRemapRoot,
  kWorkDir,
  kChdir,
  kOutput,
  kError,
  kStdin,
  kFind,
  kExec
};
struct ChildError {
  ChildStep step = ChildStep::kExec;
  int error = 0;
};

// Where the child's report pipe ends up once stdio is in place; every
// descriptor above it is closed.
constexpr int kReportFd = STDERR_FILENO + 1;
static_assert(kPmiFd == kReportFd + 1, "a rank's PMI socket follows the report pipe");

// The binding plan, applied in the child between fork and exec: only
// stack memory, no allocation.
bool BindCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    CPU_SET(cpu, &set);
  }
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

bool BindMemory(const std::vector<int>& numa_nodes) {
  constexpr int kMpolBind = 2;  // MPOL_BIND in <linux/mempolicy.h>
  constexpr int kBits = 8 * sizeof(unsigned long);
  unsigned long mask[1024 / kBits] = {};
  int highest = 0;
  for (const int node : numa_nodes) {
    if (node < 0 || node >= 1024) return false;
    mask[node / kBits] |= 1UL << (node % kBits);
    highest = std::max(highest, node);
  }
  // maxnode counts bits, one more than the kernel reads.
  return ::syscall(SYS_set_mempolicy, kMpolBind, mask, highest + 2) == 0;
}

[[noreturn]] void ChildFails(int report_fd, ChildStep step, int error = errno) {
  const ChildError report{step, error};
  // Best effort: a parent that reads nothing sees a successful exec and then
  // the rank's exit 127.
  (void)!::write(report_fd, &report, sizeof report);
  ::_exit(127);
}

// Everything one child needs, prepared by the parent.
struct ChildPlan {
  pid_t group = 0;
  const LaunchFile* file = nullptr;
  const RankLaunch* rank = nullptr;
  const Account* account = nullptr;      // null: keep the stepd's identity
  const std::string* program = nullptr;  // searched in the job's PATH unless a script
  bool search = false;
  char* const* argv = nullptr;
  char* const* env = nullptr;
  const RankStdio* stdio = nullptr;           // null: /dev/null and the rank's files
  const ContainerEntry* container = nullptr;  // null: the node's own files
  char* task_pid = nullptr;  // the room after SLURM_TASK_PID= in `env`, for the child's pid
};

// SLURM_TASK_PID= and room for any pid: the child writes its own in.
constexpr std::string_view kTaskPid = "SLURM_TASK_PID=";
constexpr std::size_t kPidDigits = 20;

// The submitter's soft limits from the rank's SLURM_RLIMIT_* (as sbatch
// and srun pass them), each up to this node's hard limit; a value that is
// no number is passed over. Between fork and exec: no allocation.
void ApplyResourceLimits(char* const* env) {
  const std::string_view prefix = launch::kRlimitPrefix;
  for (char* const* entry = env; *entry != nullptr; ++entry) {
    const std::string_view var(*entry);
    if (!var.starts_with(prefix)) continue;
    const std::string_view rest = var.substr(prefix.size());
    const std::size_t equals = rest.find('=');
    if (equals == std::string_view::npos || equals + 1 == rest.size()) continue;
    const std::string_view name = rest.substr(0, equals);
    const std::string_view digits = rest.substr(equals + 1);
    rlim_t value = 0;
    bool number = true;
    for (const char c : digits) {
      if (c < '0' || c > '9') {
        number = false;
        break;
      }
      const auto digit = static_cast<rlim_t>(c - '0');
      value = value > (RLIM_INFINITY - digit) / 10 ? RLIM_INFINITY : value * 10 + digit;
    }
    if (!number) continue;
    for (const launch::ResourceLimit& limit : launch::kResourceLimits) {
      if (limit.name != name) continue;
      rlimit now{};
      if (::getrlimit(limit.resource, &now) != 0) break;
      now.rlim_cur = std::min(value, now.rlim_max);
      (void)::setrlimit(limit.resource, &now);
      break;
    }
  }
}

// Writes `pid` in decimal at `out` (kPidDigits + 1 bytes), terminated.
// Between fork and exec: no allocation, no locale.
void WritePid(pid_t pid, char* out) {
  char digits[kPidDigits];
  std::size_t n = 0;
  auto value = static_cast<unsigned long long>(pid);
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < kPidDigits);
  for (std::size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

int OpenOutput(const std::string& path, OpenMode mode) {
  // O_APPEND in both modes: the rank that truncates shares the file with
  // ranks that append, and must not write over them.
  const int how = O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY | O_CLOEXEC |
                  (mode == OpenMode::kTruncate ? O_TRUNC : 0);
  return ::open(path.c_str(), how, 0644);
}

// The rank's stdout and stderr files, opened in the child.
void OpenRankFiles(const RankLaunch& rank, int report_fd, int& out, int& err) {
  out = OpenOutput(rank.output, rank.output_mode);
  if (out < 0) ChildFails(report_fd, ChildStep::kOutput);
  err = out;
  if (!rank.error.empty() && rank.error != rank.output) {
    err = OpenOutput(rank.error, rank.error_mode);
    if (err < 0) ChildFails(report_fd, ChildStep::kError);
  }
}

// --container-remap-root: a user namespace of the rank's own, where it is
// root and its own uid and gid outside (enroot's way; it gains no right on
// the node). 0, or the errno.
int WriteProcFile(const char* path, std::string_view text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  return written ? 0 : error;
}

int RemapToRoot() {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER) != 0) return errno;
  if (const int error = WriteProcFile("/proc/self/setgroups", "deny"); error != 0) return error;
  if (const int error = WriteProcFile("/proc/self/uid_map", fmt::format("0 {} 1", uid));
      error != 0) {
    return error;
  }
  return WriteProcFile("/proc/self/gid_map", fmt::format("0 {} 1", gid));
}

// Runs in the child between fork and exec. The stepd is single-threaded, so
// anything may be called here. The stepd keeps 0-2 open, so every other
// descriptor it passes is above 2. Everything that touches the user's files
// happens after the child has become the user: root never creates,
// truncates or searches anything on a user's behalf.
[[noreturn]] void ExecRank(const ChildPlan& plan, int report_fd) {
  const LaunchFile& file = *plan.file;
  const RankLaunch& rank = *plan.rank;
  const bool pty = plan.stdio != nullptr && !plan.stdio->pty.empty();
  // A rank on a terminal leads a session of its own, which the terminal
  // belongs to (--pty runs one task, so no other rank joins its group).
  if (pty) {
    ::setsid();
  } else {
    ::setpgid(0, plan.group);
  }
  // Whatever the stepd inherited is no business of a rank.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal = 1; signal < NSIG; ++signal) ::sigaction(signal, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // The submitter's umask, as sbatch passes it: the rank's files (its
  // output first) are as private as the user made them at submission.
  ::umask(static_cast<mode_t>(file.umask));

  // Into the launch's cgroups while still privileged: the agent made them.
  const std::string pid = std::to_string(::getpid());
  for (const std::string& folder : file.cgroups) {
    const std::string procs = folder + "/cgroup.procs";
    const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ChildFails(report_fd, ChildStep::kCgroup);
    if (::write(fd, pid.data(), pid.size()) < 0) ChildFails(report_fd, ChildStep::kCgroup);
    ::close(fd);
  }
  if (!rank.cpus.empty() && !BindCpus(rank.cpus)) ChildFails(report_fd, ChildStep::kCpuBind);
  if (!rank.mem_numa.empty() && !BindMemory(rank.mem_numa)) {
    ChildFails(report_fd, ChildStep::kMemBind);
  }
  const ContainerEntry* container = plan.container;
  int out = plan.stdio != nullptr ? plan.stdio->out : -1;
  int err = plan.stdio != nullptr ? plan.stdio->err : -1;
  int in = plan.stdio != nullptr ? plan.stdio->in : -1;
  // No stream's pipes (none given, or only a PMI socket): the rank's files.
  const bool files = out < 0 && err < 0 && !pty;
  if (container != nullptr) {
    // The output files are the node's: opened as the owner before the
    // node's tree is left, with root's rights kept to enter the container.
    const Account* account = plan.account;
    if (account != nullptr && (::setgroups(account->groups.size(), account->groups.data()) != 0 ||
                               ::setegid(account->gid) != 0 || ::seteuid(account->uid) != 0)) {
      ChildFails(report_fd, ChildStep::kIdentity);
    }
    if (files) OpenRankFiles(rank, report_fd, out, err);
    if (account != nullptr && (::seteuid(0) != 0 || ::setegid(0) != 0)) {
      ChildFails(report_fd, ChildStep::kIdentity);
    }
    if (::setns(container->namespace_fd, CLONE_NEWNS) != 0 || ::chdir("/") != 0) {
      ChildFails(report_fd, ChildStep::kContainer);
    }
  }
  if (const Account* account = plan.account) {
    // Groups first, then the group, then the user: each step needs the
    // privilege the next one drops.
    if (::setgroups(account->groups.size(), account->groups.data()) != 0 ||
        ::setgid(account->gid) != 0 || ::setuid(account->uid) != 0) {
      ChildFails(report_fd, ChildStep::kIdentity);
    }
    if (::getuid() != account->uid || ::geteuid() != account->uid || ::getgid() != account->gid ||
        ::getegid() != account->gid || (account->uid != 0 && ::setuid(0) == 0)) {
      ChildFails(report_fd, ChildStep::kIdentity, EPERM);
    }
  }
  if (container != nullptr && container->remap_root && ::getuid() != 0) {
    if (const int error = RemapToRoot(); error != 0) {
      ChildFails(report_fd, ChildStep::kRemapRoot, error);
    }
  }
  const std::string& work_dir = container != nullptr ? container->work_dir : file.work_dir;
  if (const int error = MakeFolders(work_dir); error != 0) {
    ChildFails(report_fd, ChildStep::kWorkDir, error);
  }
  if (::chdir(work_dir.c_str()) != 0) ChildFails(report_fd, ChildStep::kChdir);
  if (pty) {
    in = ::open(plan.stdio->pty.c_str(), O_RDWR | O_CLOEXEC);
    if (in < 0 || ::ioctl(in, TIOCSCTTY, 0) != 0) ChildFails(report_fd, ChildStep::kStdin);
    out = in;
    err = in;
  }
  if (files && container == nullptr) OpenRankFiles(rank, report_fd, out, err);
  std::string program = *plan.program;
  if (plan.search) {
    const std::string& search_path =
        container != nullptr ? container->search_path : file.search_path;
    if (const int error = FindProgram(*plan.program, search_path, work_dir, program); error != 0) {
      ChildFails(report_fd, ChildStep::kFind, error);
    }
  }
  int null = in;
  if (null < 0) null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) ChildFails(report_fd, ChildStep::kStdin);
  if (::dup2(null, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0) {
    ChildFails(report_fd, ChildStep::kStdin);
  }
  // The PMI socket out of the way of the report pipe's move, then to the
  // descriptor after it, where PMI_FD says it is.
  int pmi = plan.stdio != nullptr ? plan.stdio->pmi : -1;
  if (pmi >= 0) {
    pmi = ::fcntl(pmi, F_DUPFD_CLOEXEC, kReportFd + 16);
    if (pmi < 0) ChildFails(report_fd, ChildStep::kStdin);
  }
  if (report_fd != kReportFd) {
    // Whatever held kReportFd is closed below anyway.
    if (::dup3(report_fd, kReportFd, O_CLOEXEC) < 0) ChildFails(report_fd, ChildStep::kStdin);
  }
  if (pmi >= 0 && ::dup2(pmi, kReportFd + 1) < 0) ChildFails(kReportFd, ChildStep::kStdin);
  // Nothing of the stepd's (the event file, the agent's socket) leaks into a
  // rank, close-on-exec or not; the report pipe closes on exec.
  ::closefrom(pmi >= 0 ? kReportFd + 2 : kReportFd + 1);
  if (plan.task_pid != nullptr) WritePid(::getpid(), plan.task_pid);
  ApplyResourceLimits(plan.env);
  ::execve(program.c_str(), plan.argv, plan.env);
  ChildFails(kReportFd, ChildStep::kExec);
}

// The parent's words for what a child could not do.
absl::Status ChildFailure(const ChildError& child, const LaunchFile& file, const RankLaunch& rank,
                          const Account* account, const std::string& shown,
                          const ContainerEntry* container) {
  const std::string& node = file.node;
  const std::string& work_dir = container != nullptr ? container->work_dir : file.work_dir;
  const int error = child.error;
  switch (child.step) {
    case ChildStep::kCgroup:
      return ErrnoFailure(error, node,
                          fmt::format("cannot move rank {} into its cgroups {}", rank.rank,
                                      fmt::join(file.cgroups, ", ")));
    case ChildStep::kCpuBind:
      return ErrnoFailure(
          error, node,
          fmt::format("cannot bind rank {} to CPUs {}", rank.rank, fmt::join(rank.cpus, ",")));
    case ChildStep::kMemBind:
      return ErrnoFailure(error, node,
                          fmt::format("cannot bind rank {}'s memory to NUMA node {}", rank.rank,
                                      fmt::join(rank.mem_numa, ",")));
    case ChildStep::kIdentity:
      return ErrnoFailure(
          error, node,
          fmt::format("cannot run as user {} (uid {})", account ? account->name : "?", file.uid));
    case ChildStep::kContainer:
      return ErrnoFailure(error, node,
                          fmt::format("rank {} cannot enter the step's container", rank.rank));
    case ChildStep::kRemapRoot:
      return ErrnoFailure(
          error, node,
          fmt::format("rank {} cannot be root in a user namespace "
                      "(--container-remap-root; is kernel.unprivileged_userns_clone "
                      "off?)",
                      rank.rank));
    case ChildStep::kWorkDir:
      return ErrnoFailure(error, node, fmt::format("cannot create working directory {}", work_dir));
    case ChildStep::kChdir:
      return ErrnoFailure(error, node, fmt::format("working directory {}", work_dir));
    case ChildStep::kOutput:
      return ErrnoFailure(error, node, fmt::format("cannot open output file {}", rank.output));
    case ChildStep::kError:
      return ErrnoFailure(error, node, fmt::format("cannot open error file {}", rank.error));
    case ChildStep::kStdin:
      return ErrnoFailure(error, node, fmt::format("cannot set up the stdio of {}", shown));
    case ChildStep::kFind:
      return ErrnoFailure(error, node, fmt::format("cannot run {}", shown));
    case ChildStep::kExec:
      if (error == ENOEXEC && !file.script_path.empty()) {
        return Failure(
            absl::StatusCode::kFailedPrecondition, node,
            fmt::format("cannot run {}: its first line must be #! and an interpreter", shown));
      }
      return ErrnoFailure(error, node, fmt::format("cannot run {}", shown));
  }
  return ErrnoFailure(error, node, fmt::format("cannot run {}", shown));
}

}  // namespace

SpawnResult SpawnRanks(const LaunchFile& file,
                       const std::function<void(const RankStartedEvent&)>& on_started,
                       std::span<const RankStdio> stdio, const ContainerEntry* container) {
  SpawnResult result;
  const std::string& node = file.node;

  std::optional<Account> account;
  if (file.run_as == RunAs::kOwner) {
    absl::StatusOr<Account> found = LookupAccount(file.uid, node);
    if (!found.ok()) {
      result.status = Failure(found.status().code(), node, std::string(found.status().message()));
      return result;
    }
    account = *std::move(found);
  }

  std::string program;
  std::vector<std::string> argv;
  std::string shown;  // the program as the user wrote it, for messages
  bool search = false;
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
    program = file.argv.front();
    search = true;
    shown = fmt::format("\"{}\"", file.argv.front());
    argv = file.argv;
  }
  std::vector<char*> argv_pointers = Pointers(argv);

  for (std::size_t i = 0; i < file.ranks.size(); ++i) {
    const RankLaunch& rank = file.ranks[i];
    std::vector<std::string> env = account ? AccountEnvironment(rank.env, *account) : rank.env;
    // SLURM_TASK_PID: the rank's own pid, known once forked.
    std::erase_if(env, [](const std::string& var) { return var.starts_with(kTaskPid); });
    env.push_back(std::string(kTaskPid) + std::string(kPidDigits + 1, '\0'));
    std::vector<char*> env_pointers = Pointers(env);
    char* task_pid = env.back().data() + kTaskPid.size();

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
      result.status = ErrnoFailure(errno, node, "cannot create a pipe");
      return result;
    }
    const ChildPlan plan{
        .group = result.process_group,
        .file = &file,
        .rank = &rank,
        .account = account ? &*account : nullptr,
        .program = &program,
        .search = search,
        .argv = argv_pointers.data(),
        .env = env_pointers.data(),
        .stdio = i < stdio.size() ? &stdio[i] : nullptr,
        .container = container,
        .task_pid = task_pid,
    };
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      ExecRank(plan, report[1]);
    }
    const int fork_error = errno;
    ::close(report[1]);
    if (pid < 0) {
      ::close(report[0]);
      result.status = ErrnoFailure(fork_error, node, fmt::format("cannot start {}", shown));
      return result;
    }
    // Both sides set the group, so it exists whichever runs first; a rank
    // on a terminal makes its own session, which a group set here first
    // would forbid.
    if (i >= stdio.size() || stdio[i].pty.empty()) {
      ::setpgid(pid, result.process_group == 0 ? pid : result.process_group);
    }

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
      result.status =
          ChildFailure(child_error, file, rank, account ? &*account : nullptr, shown, container);
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
