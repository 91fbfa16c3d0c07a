// SPDX-License-Identifier: Apache-2.0
#include "step_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/magic.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "agent_log.h"
#include "cohort/fmt_absl.h"
#include "device_filter.h"
#include "job_cgroup.h"

extern char** environ;

namespace cohort::agent {
namespace {

absl::Status SpoolErrno(int error, std::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      fmt::format("{}: {}", what, std::strerror(error)));
}

absl::Status NodeErrno(int error, const std::string& node, std::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      fmt::format("{}: {}: {}", node, what, std::strerror(error)));
}

// Writes `text` to a new file at `path` (replacing one there) with `mode`.
int WriteNewFile(const std::string& path, std::string_view text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  // The umask may have taken bits the mode asked for.
  int error = ::fchmod(fd, mode) == 0 ? 0 : errno;
  while (error == 0 && !text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno != EINTR) error = errno;
      continue;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

class StepdSpawnAttributes {
 public:
  StepdSpawnAttributes() {
    ::posix_spawnattr_init(&attr_);
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    // The agent's handlers and mask (Asio's, gRPC's) are no business of the
    // stepd.
    ::posix_spawnattr_setsigmask(&attr_, &none);
    ::posix_spawnattr_setsigdefault(&attr_, &all);
    ::posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  StepdSpawnAttributes(const StepdSpawnAttributes&) = delete;
  StepdSpawnAttributes& operator=(const StepdSpawnAttributes&) = delete;
  ~StepdSpawnAttributes() { ::posix_spawnattr_destroy(&attr_); }
  [[nodiscard]] const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_{};
};

class StepdFileActions {
 public:
  StepdFileActions() { ::posix_spawn_file_actions_init(&actions_); }
  StepdFileActions(const StepdFileActions&) = delete;
  StepdFileActions& operator=(const StepdFileActions&) = delete;
  ~StepdFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  [[nodiscard]] posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

}  // namespace

std::string StepdNextToAgent() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "cohort-stepd";
  return (self.parent_path() / "cohort-stepd").string();
}

StepLauncher::StepLauncher(std::string spool_dir, std::string stepd_path,
                           std::string host_topology_xml)
    : host_topology_xml_(std::move(host_topology_xml)), stepd_path_(std::move(stepd_path)) {
  // Absolute: the stepds keep the path, and the agent's folder may change.
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(spool_dir, error);
  spool_dir_ = error ? std::move(spool_dir) : absolute.lexically_normal().string();
  while (spool_dir_.size() > 1 && spool_dir_.ends_with('/')) spool_dir_.pop_back();
}

StepLauncher::~StepLauncher() {
  // What no launch uses any more; a folder a launch still holds (EBUSY)
  // stays for the next agent.
  for (const step::CgroupTree& tree : cgroup_trees_) {
    for (const std::string& node : nodes_) ::rmdir(fmt::format("{}/{}", tree.base, node).c_str());
    ::rmdir(tree.base.c_str());
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status StepLauncher::PrepareSpool() {
  if (::mkdir(spool_dir_.c_str(), 0700) != 0) {
    const int error = errno;
    if (error != EEXIST) {
      return absl::Status(absl::ErrnoToStatusCode(error),
                          fmt::format("cannot create spool folder {}: {}; pass --spool DIR",
                                      spool_dir_, std::strerror(error)));
    }
  }
  // Scripts run from here: a folder someone else controls could swap them.
  struct stat info {};
  if (::lstat(spool_dir_.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "spool {} exists and is not a folder; remove it or pass --spool DIR", spool_dir_));
  }
  if (info.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(
        fmt::format("spool folder {} is owned by uid {}, not by this user (uid "
                    "{}); remove it or pass --spool "
                    "DIR",
                    spool_dir_, info.st_uid, ::geteuid()));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("spool folder {} is writable by others (mode {:o}); chmod "
                    "700 it or pass --spool DIR",
                    spool_dir_, info.st_mode & 07777));
  }
  // Two agents on one spool would both adopt (and report) the same launches.
  const std::string lock_path = spool_dir_ + "/agent.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0) return SpoolErrno(errno, fmt::format("cannot open {}", lock_path));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          fmt::format("spool folder {} is in use by another cohort-agent; stop "
                      "it, or give each agent its "
                      "own --spool",
                      spool_dir_));
    }
    return SpoolErrno(errno, fmt::format("cannot lock {}", lock_path));
  }
  if (::access(stepd_path_.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("cannot run {}: {}; install cohort-stepd next to cohort-agent", stepd_path_,
                    std::strerror(errno)));
  }
  if (::geteuid() == 0) {
    AgentLog().info("ranks_run_as owner: each job's ranks run as the user who submitted it");
  } else {
    AgentLog().info(
        "ranks_run_as agent uid={}: the agent is not root, so every job's ranks run as uid {}, "
        "whoever submitted the job",
        ::geteuid(), ::geteuid());
  }
  if (absl::Status cgroups = PrepareCgroups(); !cgroups.ok()) {
    DisableCgroups(cgroups);
  } else {
    std::vector<std::string> trees;
    for (const step::CgroupTree& tree : cgroup_trees_) {
      trees.push_back(tree.controller.empty() ? tree.base
                                              : fmt::format("{}={}", tree.controller, tree.base));
    }
    AgentLog().info("cgroups_enabled version={} trees={} devices={:?}", CgroupVersion(),
                    fmt::join(trees, ","), devices_);
  }
  // The machine for the PMIx servers of `srun --mpi=pmix` steps: read from
  // this file, OpenPMIx's server starts in 2-3 ms rather than about 20 ms
  // of discovering the machine again (docs/performance.md).
  if (!host_topology_xml_.empty()) {
    const std::string path = spool_dir_ + "/hwloc-topology.xml";
    const std::string temporary = path + ".new";
    if (const int error = WriteNewFile(temporary, host_topology_xml_, 0600);
        error != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
      AgentLog().warn("topology_not_written path={} error=\"{}\" pmix_servers=discover", path,
                      std::strerror(error != 0 ? error : errno));
    } else {
      topology_file_ = path;
    }
  }
  return absl::OkStatus();
}

namespace {

bool IsFileSystem(const std::string& path, decltype(statfs::f_type) type) {
  struct statfs info {};
  return ::statfs(path.c_str(), &info) == 0 && info.f_type == type;
}

}  // namespace

absl::Status StepLauncher::PrepareCgroups() {
  const std::string mount(step::kCgroupMount);
  const std::string own_text = step::ReadSmallFile("/proc/self/cgroup").value_or("");
  if (IsFileSystem(mount, CGROUP2_SUPER_MAGIC)) return PrepareUnified(mount, own_text);
  // cgroup v1 (or hybrid): a tree per hierarchy, each under the agent's own
  // cgroup in it. There is no "no internal processes" rule to move for.
  std::string why = fmt::format(
      "{} is neither cgroup v2 nor holds a cgroup v1 hierarchy of cpuset, memory or devices",
      mount);
  for (const std::string_view controller : step::kV1Controllers) {
    const std::string hierarchy = fmt::format("{}/{}", mount, controller);
    const std::optional<std::string> own = step::V1CgroupPath(own_text, controller);
    if (!own || !IsFileSystem(hierarchy, CGROUP_SUPER_MAGIC)) continue;
    step::CgroupTree tree{.base = step::CgroupBase(hierarchy, *own),
                          .controller = std::string(controller)};
    if (::access(tree.base.c_str(), W_OK) != 0) {
      why = fmt::format("cannot write {}: {}; run the agent as root", tree.base,
                        std::strerror(errno));
      continue;
    }
    tree.base += "/" + step::AgentCgroupName(spool_dir_);
    if (absl::Status made = step::CreateCgroup(tree, tree.base); !made.ok()) {
      why = std::string(made.message());
      continue;
    }
    cgroup_trees_.push_back(std::move(tree));
  }
  if (cgroup_trees_.empty()) return absl::FailedPreconditionError(why);
  devices_ = std::ranges::any_of(
                 cgroup_trees_, [](const step::CgroupTree& t) { return t.controller == "devices"; })
                 ? "limited (devices.deny)"
                 : "unlimited (no devices hierarchy)";
  return absl::OkStatus();
}

absl::Status StepLauncher::PrepareUnified(const std::string& mount, const std::string& own_text) {
  const std::optional<std::string> own = step::UnifiedCgroupPath(own_text);
  if (!own) return absl::FailedPreconditionError("/proc/self/cgroup names no cgroup v2 path");
  const std::string base = step::CgroupBase(mount, *own);
  const std::string leaf = fmt::format("{}/{}", base, step::kAgentCgroupLeaf);
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    return SpoolErrno(errno, fmt::format("cannot create {}", leaf));
  }
  const std::string subtree = base + "/cgroup.subtree_control";
  absl::Status enabled = step::WriteCgroupFile(subtree, "+memory");
  const bool in_leaf = own->ends_with(fmt::format("/{}", step::kAgentCgroupLeaf));
  if (!enabled.ok() && !in_leaf) {
    // cgroup v2 hands controllers down only from a cgroup without processes
    // of its own: the agent moves into its leaf and tries again.
    if (absl::Status moved =
            step::WriteCgroupFile(leaf + "/cgroup.procs", std::to_string(::getpid()));
        !moved.ok()) {
      return moved;
    }
    enabled = step::WriteCgroupFile(subtree, "+memory");
  }
  if (!enabled.ok()) {
    return absl::FailedPreconditionError(fmt::format(
        "{}; give the agent a cgroup of its own, with the memory controller, that no other "
        "process shares (systemd: Delegate=yes)",
        enabled.message()));
  }
  unified_controllers_ = "+memory";
  // The cpuset controller is welcome, not required: without it launches
  // keep to their cores by affinity alone.
  if (step::WriteCgroupFile(subtree, "+cpuset").ok()) unified_controllers_ += " +cpuset";
  step::CgroupTree tree{.base = fmt::format("{}/{}", base, step::AgentCgroupName(spool_dir_)),
                        .controller = ""};
  absl::Status made = step::CreateCgroup(tree, tree.base);
  if (made.ok()) {
    made = step::WriteCgroupFile(tree.base + "/cgroup.subtree_control", unified_controllers_);
  }
  if (!made.ok()) return made;
  cgroup_trees_.push_back(std::move(tree));
  // cgroup v2 limits devices by an eBPF program, which needs root (or
  // CAP_BPF) and a kernel with cgroup BPF: without, launches still get
  // their memory and cores.
  if (absl::Status filter = step::CheckDeviceFilter(); filter.ok()) {
    devices_ = "limited (eBPF)";
  } else {
    devices_ = fmt::format("unlimited ({})", filter.message());
  }
  return absl::OkStatus();
}

void StepLauncher::DisableCgroups(const absl::Status& why) {
  cgroup_trees_.clear();
  AgentLog().warn("cgroups unavailable ({}); jobs are tracked by process group only",
                  why.message());
}

std::vector<std::string> StepLauncher::LaunchCgroups(const std::string& node,
                                                     step::LaunchId id) const {
  std::vector<std::string> folders;
  for (const step::CgroupTree& tree : cgroup_trees_) {
    folders.push_back(step::LaunchCgroupFolder(tree.base, node, id.job_id, id.attempt, id.step));
  }
  return folders;
}

void StepLauncher::KillLaunchCgroup(const std::string& node, step::LaunchId id) const {
  for (const std::string& folder : LaunchCgroups(node, id)) step::KillCgroup(folder);
}

void StepLauncher::RemoveLaunchCgroup(const std::string& node, step::LaunchId id) const {
  for (const std::string& folder : LaunchCgroups(node, id)) {
    if (absl::Status removed = step::RemoveCgroup(folder, std::chrono::milliseconds(0));
        !removed.ok()) {
      LaunchLog().warn("cgroup_not_removed job={} node={} attempt={} error={:?}", id.job_id, node,
                       id.attempt, removed.message());
    }
  }
}

absl::Status StepLauncher::PrepareNode(const std::string& node) {
  if (node.empty() || node == "." || node == ".." || node.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("node name {:?} cannot name a spool folder; name the node without '/'", node));
  }
  const std::string folder = fmt::format("{}/{}", spool_dir_, node);
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    return SpoolErrno(errno, fmt::format("cannot create spool folder {}", folder));
  }
  for (const step::CgroupTree& tree : cgroup_trees_) {
    const std::string cgroup = fmt::format("{}/{}", tree.base, node);
    absl::Status made = step::CreateCgroup(tree, cgroup);
    if (made.ok() && tree.controller.empty()) {
      made = step::WriteCgroupFile(cgroup + "/cgroup.subtree_control", unified_controllers_);
    }
    if (made.ok() && ::access(cgroup.c_str(), W_OK) != 0) {
      made = SpoolErrno(errno, fmt::format("cannot write {}", cgroup));
    }
    if (!made.ok()) {
      DisableCgroups(made);
      break;
    }
  }
  if (!cgroup_trees_.empty()) nodes_.push_back(node);
  return absl::OkStatus();
}

std::string StepLauncher::LaunchFolder(const std::string& node, step::LaunchId id) const {
  return fmt::format("{}/{}/{}", spool_dir_, node, step::LaunchFolderName(id));
}

std::vector<std::pair<step::LaunchId, std::string>> StepLauncher::ListLaunches(
    const std::string& node) const {
  std::vector<std::pair<step::LaunchId, std::string>> launches;
  std::error_code error;
  const std::filesystem::path folder = std::filesystem::path(spool_dir_) / node;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error)) {
    const std::optional<step::LaunchId> id =
        step::ParseLaunchFolderName(it->path().filename().string());
    if (!id || !it->is_directory(error)) {
      LaunchLog().debug("spool_entry_ignored path={}", it->path().string());
      continue;
    }
    launches.emplace_back(*id, it->path().string());
  }
  if (error) {
    LaunchLog().warn("spool_unreadable folder={} error={:?}", folder.string(), error.message());
  }
  return launches;
}

absl::Status StepLauncher::CreateLaunchFolder(const std::string& folder) const {
  if (::mkdir(folder.c_str(), 0700) == 0) return absl::OkStatus();
  const int error = errno;
  if (error == EEXIST) return absl::AlreadyExistsError(fmt::format("{} exists", folder));
  return SpoolErrno(error, fmt::format("cannot create launch folder {}", folder));
}

absl::Status StepLauncher::WriteScript(const std::string& path, std::string_view text,
                                       const std::string& node) {
  if (const int error = WriteNewFile(path, text, 0700); error != 0) {
    return NodeErrno(error, node, fmt::format("cannot write the batch script {}", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<pid_t> StepLauncher::Start(const std::string& folder,
                                          const step::LaunchFile& planned,
                                          const step::LaunchLimits& limits) const {
  step::LaunchFile file = planned;
  if (file.mpi.type == "pmix") file.mpi.topology_file = topology_file_;
  step::LaunchLimits applied = limits;
  if (!LimitsDevices()) applied.denied_devices.clear();
  // A leftover of the same launch id (the controller's state was reset) is
  // reused.
  for (const step::CgroupTree& tree : cgroup_trees_) {
    const std::string cgroup =
        step::LaunchCgroupFolder(tree.base, file.node, file.job_id, file.attempt, file.step);
    file.cgroups.push_back(cgroup);
    absl::Status made = step::CreateCgroup(tree, cgroup);
    if (made.ok()) made = step::ApplyLimits(tree, cgroup, applied);
    if (!made.ok()) {
      for (const std::string& made_folder : file.cgroups) {
        (void)step::RemoveCgroup(made_folder, std::chrono::milliseconds(0));
      }
      return absl::Status(made.code(), fmt::format("{}: {}", file.node, made.message()));
    }
  }
  // Written whole under another name, then renamed: a stepd (or an agent
  // adopting the folder) never sees half of it.
  const std::string path = folder + "/launch.json";
  const std::string temporary = path + ".new";
  if (const int error = WriteNewFile(temporary, step::LaunchFileToJson(file), 0600); error != 0) {
    return NodeErrno(error, file.node, fmt::format("cannot write {}", temporary));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return NodeErrno(errno, file.node, fmt::format("cannot write {}", path));
  }

  absl::StatusOr<pid_t> pid =
      SpawnAlone(stepd_path_, {folder}, {}, folder + "/stepd.log", OpenMode::kAppend);
  if (!pid.ok())
    return absl::Status(pid.status().code(),
                        fmt::format("{}: {}", file.node, pid.status().message()));
  return pid;
}

absl::StatusOr<pid_t> SpawnAlone(const std::string& program, const std::vector<std::string>& args,
                                 const std::vector<std::string>& extra_env,
                                 const std::string& output, OpenMode mode) {
  StepdFileActions actions;
  ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(
      actions.get(), STDOUT_FILENO, output.c_str(),
      O_WRONLY | O_CREAT | O_NOFOLLOW | (mode == OpenMode::kAppend ? O_APPEND : O_TRUNC), 0600);
  ::posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  // Nothing of the agent's (its streams, the spool lock) leaks into the child.
  ::posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
  StepdSpawnAttributes attributes;
  std::vector<std::string> words = {program};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::vector<std::string> variables = extra_env;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (std::string& variable : variables) env.push_back(variable.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, program.c_str(), actions.get(), attributes.get(),
                                  argv.data(), env.data());
  if (error != 0) {
    return absl::Status(absl::ErrnoToStatusCode(error),
                        fmt::format("cannot start {}: {}", program, std::strerror(error)));
  }
  return pid;
}

void StepLauncher::RemoveLaunch(const std::string& folder) {
  std::error_code error;
  std::filesystem::remove_all(folder, error);
  if (error) {
    LaunchLog().warn("launch_folder_not_removed folder={} error={:?}", folder, error.message());
  }
}

}  // namespace cohort::agent
