// SPDX-License-Identifier: Apache-2.0
#include "step_container.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/container/container_options.h"
#include "image_pull.h"
#include "proc_stat.h"

namespace cohort::step {
namespace {

// Devices every container has, bound from the host's /dev; and the NVIDIA
// driver's control files, which every GPU process opens besides its GPUs'.
constexpr std::string_view kBasicDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};
constexpr std::string_view kGpuControlDevices[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                                   "nvidia-modeset"};

absl::Status Failed(absl::StatusCode code, const std::string& node, std::string_view text) {
  return absl::Status(code, fmt::format("{}: container: {}", node, text));
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

// Runs `cohort-image pull` for the image and reads what it printed: the
// image's description, or its one line of why not.
absl::StatusOr<ImageInfo> PullImage(const LaunchFile& file, const std::string& reference,
                                    const std::optional<Account>& owner) {
  std::vector<std::string> argv =
      ImagePullCommand(ImageProgram(), file.container.images, reference,
                       owner ? std::optional<std::uint32_t>(owner->uid) : std::nullopt);
  std::vector<char*> pointers;
  for (std::string& word : argv) pointers.push_back(word.data());
  pointers.push_back(nullptr);

  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return Failed(absl::StatusCode::kInternal, file.node,
                  fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Failed(absl::StatusCode::kInternal, file.node,
                  fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execv(pointers.front(), pointers.data());
    const std::string why =
        fmt::format("cannot run {}: {}\n", pointers.front(), std::strerror(errno));
    (void)!::write(STDERR_FILENO, why.data(), why.size());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return Failed(absl::StatusCode::kInternal, file.node,
                  fmt::format("cannot start cohort-image: {}", std::strerror(errno)));
  }
  // Its description is small, and its errors one line: reading one pipe to
  // its end before the other cannot fill the other.
  const std::string printed = ReadAll(out[0]);
  const std::string complaint = ReadAll(err[0]);
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Failed(absl::StatusCode::kUnavailable, file.node,
                  ImagePullComplaint(complaint, reference, status));
  }
  absl::StatusOr<ImageInfo> info = ParseImageInfo(printed);
  if (!info.ok()) {
    return Failed(absl::StatusCode::kInternal, file.node,
                  fmt::format("image {:?}: {}", reference, std::string(info.status().message())));
  }
  return info;
}

// A job's steps on a node use the image its first one there resolved: the
// tag is pinned to that digest in the job's state folder (which goes when
// the job leaves the node), so a later step starts from the cache without
// cohort-image or the registry. FNV-1a names the pin: stable, and short
// enough for a file name whatever the reference.
std::string PinPath(const ContainerSetup& c, std::string_view reference) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char ch : reference) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 1099511628211ULL;
  }
  return fmt::format("{}/pins/{:016x}", c.state_dir, hash);
}

// The pinned image's description from the cache; nullopt when there is no
// pin or the image has left the cache (then cohort-image pulls it).
std::optional<ImageInfo> PinnedImage(const ContainerSetup& c, std::string_view reference) {
  if (c.state_dir.empty()) return std::nullopt;
  const int pin = ::open(PinPath(c, reference).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (pin < 0) return std::nullopt;
  const std::string text = ReadAll(pin);
  ::close(pin);
  // "REFERENCE\nDIGEST": the reference guards against a hash collision.
  const std::size_t newline = text.find('\n');
  if (newline == std::string::npos || text.substr(0, newline) != reference) return std::nullopt;
  const std::string digest = text.substr(newline + 1);
  if (!digest.starts_with("sha256:") || digest.find('/') != std::string::npos) return std::nullopt;
  const std::string folder =
      fmt::format("{}/images/sha256-{}", c.images.cache_dir, digest.substr(7));
  const int described = ::open((folder + "/image.json").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (described < 0) return std::nullopt;
  const std::string json = ReadAll(described);
  ::close(described);
  absl::StatusOr<ImageInfo> info = ParseImageInfo(json);
  if (!info.ok() || info->digest != digest) return std::nullopt;
  // Used now, for the cache's least-recently-used order.
  (void)::utimensat(AT_FDCWD, (folder + "/last-used").c_str(), nullptr, 0);
  return *std::move(info);
}

void PinImage(const ContainerSetup& c, std::string_view reference, const ImageInfo& image) {
  if (c.state_dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(c.state_dir + "/pins", error);
  const std::string path = PinPath(c, reference);
  const std::string temporary = path + ".new";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const std::string text = fmt::format("{}\n{}", reference, image.digest);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (written) (void)::rename(temporary.c_str(), path.c_str());
}

// ------------------------------------------------------------------ holder
// What the holder (a child of the stepd) does to make the container: it
// runs before any thread, between fork and its pause, so it may allocate.

struct HolderPlan {
  std::string node;
  std::string lower;  // the image's files
  std::string base;   // upper, work and root folders
  bool writable = true;
  std::vector<container::Mount> mounts;
  std::string work_dir;  // the job's, for relative mount sources
  std::optional<Account> owner;
  bool mount_home = false;
  std::vector<std::string> devices;  // the step's GPUs
  std::string pmix_folder;           // empty: none
  std::string hooks_dir;             // empty: none
  std::string gpu_indices;           // the step's GPUs by the node's indices ("0,1")
};

// How long one hook may take (nvidia-container-cli takes well under one).
constexpr int kHookTimeoutMs = 60'000;

// Reports `why` to the stepd and ends the holder.
[[noreturn]] void HolderFails(int report, const std::string& why) {
  (void)!::write(report, why.data(), why.size());
  ::_exit(1);
}

std::string Errno(std::string_view what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

void MountOrFail(int report, const char* source, const std::string& target, const char* type,
                 unsigned long flags, const char* data, std::string_view what) {
  if (::mount(source, target.c_str(), type, flags, data) != 0) {
    HolderFails(report, Errno(fmt::format("cannot mount {} at {}", what, target)));
  }
}

// Makes `path` (inside the root, absolute) exist as a folder or a file
// without following a symbolic link of the image's: a link there could point
// at the node's own files, which the holder, still root in the node's tree,
// would create or mount over.
void MakeMountPoint(int report, const std::string& root, const std::string& path, bool folder) {
  std::string at = root;
  std::vector<std::string_view> parts;
  for (std::size_t start = 1; start <= path.size();) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) parts.push_back(std::string_view(path).substr(start, slash - start));
    start = slash + 1;
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    at += "/";
    at += parts[i];
    const bool last = i + 1 == parts.size();
    struct stat info {};
    if (::lstat(at.c_str(), &info) == 0) {
      if (S_ISLNK(info.st_mode)) {
        HolderFails(report, fmt::format("{} is a symbolic link in the image; mount at the path "
                                        "it points to instead",
                                        at.substr(root.size())));
      }
      continue;
    }
    if (!last || folder) {
      if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
        HolderFails(report,
                    Errno(fmt::format("cannot make {} in the container", at.substr(root.size()))));
      }
    } else {
      const int fd = ::open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0) {
        HolderFails(report,
                    Errno(fmt::format("cannot make {} in the container", at.substr(root.size()))));
      }
      ::close(fd);
    }
  }
}

// Opens `path` as the job's owner would reach it (every folder on the way
// searchable by them), so that a mount shows nothing they could not open
// themselves; root keeps the stepd's identity.
int OpenAsOwner(int report, const std::string& path, const std::optional<Account>& owner) {
  if (owner && owner->uid != 0) {
    if (::setgroups(owner->groups.size(), owner->groups.data()) != 0 ||
        ::setegid(owner->gid) != 0 || ::seteuid(owner->uid) != 0) {
      HolderFails(report, Errno(fmt::format("cannot act as uid {}", owner->uid)));
    }
  }
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  const int error = errno;
  if (owner && owner->uid != 0) {
    if (::seteuid(0) != 0 || ::setegid(0) != 0 || ::setgroups(0, nullptr) != 0) {
      HolderFails(report, Errno("cannot become root again"));
    }
  }
  if (fd < 0) {
    errno = error;
    HolderFails(report, error == ENOENT
                            ? fmt::format("mount source {} does not exist on this node", path)
                            : Errno(fmt::format("cannot open mount source {}", path)));
  }
  return fd;
}

void BindInto(int report, const std::string& root, const std::string& source,
              const std::string& target, const container::Mount& how,
              const std::optional<Account>& owner) {
  const int fd = OpenAsOwner(report, source, owner);
  struct stat info {};
  if (::fstat(fd, &info) != 0) HolderFails(report, Errno(fmt::format("cannot stat {}", source)));
  MakeMountPoint(report, root, target, S_ISDIR(info.st_mode));
  const std::string at = root + target;
  const std::string from = fmt::format("/proc/self/fd/{}", fd);
  MountOrFail(report, from.c_str(), at, nullptr, MS_BIND | (how.recursive ? MS_REC : 0), nullptr,
              source);
  ::close(fd);
  const unsigned long flags = (how.read_only ? MS_RDONLY : 0) | (how.nosuid ? MS_NOSUID : 0) |
                              (how.nodev ? MS_NODEV : 0) | (how.noexec ? MS_NOEXEC : 0);
  if (flags != 0) {
    MountOrFail(report, nullptr, at, nullptr, MS_REMOUNT | MS_BIND | flags, nullptr, source);
  }
  if (!how.propagation.empty()) {
    const bool recursive = how.propagation.starts_with('r');
    const std::string_view kind = std::string_view(how.propagation).substr(recursive ? 1 : 0);
    const unsigned long type = kind == "private" ? MS_PRIVATE
                               : kind == "slave" ? MS_SLAVE
                                                 : MS_SHARED;
    MountOrFail(report, nullptr, at, nullptr, type | (recursive ? MS_REC : 0), nullptr, source);
  }
}

// A host device file at the same place in the container's /dev.
void BindDevice(int report, const std::string& root, const std::string& device) {
  struct stat info {};
  if (::stat(device.c_str(), &info) != 0) return;  // not on this node
  MakeMountPoint(report, root, device, false);
  MountOrFail(report, device.c_str(), root + device, nullptr, MS_BIND, nullptr, device);
}

void BindHostFile(int report, const std::string& root, const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return;
  struct stat inside {};
  if (::lstat((root + path).c_str(), &inside) == 0 && S_ISLNK(inside.st_mode)) return;
  MakeMountPoint(report, root, path, false);
  MountOrFail(report, path.c_str(), root + path, nullptr, MS_BIND, nullptr, path);
  MountOrFail(report, nullptr, root + path, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr,
              path);
}

// Runs one hook of ContainerHooksDir (enroot's hooks.d) in the holder's
// namespace, before the pivot, with enroot's variables so that its hooks
// (the NVIDIA one: nvidia-container-cli configure --pid=$ENROOT_PID
// $ENROOT_ROOTFS) run unchanged; fails the container with its last line of
// stderr when it fails or outlives kHookTimeoutMs.
void RunHook(int report, const HolderPlan& plan, const std::string& root, const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      fmt::format("COHORT_CONTAINER_ROOT={}", root), fmt::format("ENROOT_ROOTFS={}", root),
      fmt::format("COHORT_CONTAINER_PID={}", ::getpid()), fmt::format("ENROOT_PID={}", ::getpid())};
  if (!plan.gpu_indices.empty()) {
    env.push_back(fmt::format("NVIDIA_VISIBLE_DEVICES={}", plan.gpu_indices));
    env.emplace_back("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  }
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string program = path;
  char* argv[] = {program.data(), nullptr};
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) HolderFails(report, Errno("cannot make a pipe"));
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execve(program.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(err[1]);
  if (pid < 0) HolderFails(report, Errno(fmt::format("cannot run hook {}", name)));
  std::string said;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kHookTimeoutMs);
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd ready{.fd = err[0], .events = POLLIN, .revents = 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(left));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(err[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    said.append(buffer, static_cast<std::size_t>(n));
    if (said.size() > 64 * 1024) said.erase(0, said.size() - 64 * 1024);
  }
  ::close(err[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    HolderFails(report,
                fmt::format("hook {} took over {} s and was killed", path, kHookTimeoutMs / 1000));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string last(LastLine(said));
    HolderFails(report, fmt::format("hook {} failed ({}){}{}", path,
                                    WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                                      : fmt::format("signal {}", WTERMSIG(status)),
                                    last.empty() ? "" : ": ", last));
  }
}

// Whether root alone could have put `path` there: hooks run as root.
bool OnlyRootWrites(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && info.st_uid == 0 &&
         (info.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The executable files of the hooks folder, in name order; the folder and
// each hook must be root's and written by no one else.
std::vector<std::string> Hooks(int report, const std::string& folder) {
  if (!OnlyRootWrites(folder)) {
    HolderFails(report, fmt::format("ContainerHooksDir {} must exist, be root's and be writable by "
                                    "root alone: its hooks run as root",
                                    folder));
  }
  std::vector<std::string> hooks;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file() || ::access(path.c_str(), X_OK) != 0) continue;
    if (!OnlyRootWrites(path)) {
      HolderFails(report,
                  fmt::format("hook {} is writable by others than root; chmod go-w it", path));
    }
    hooks.push_back(path);
  }
  if (error) {
    HolderFails(report,
                fmt::format("cannot read ContainerHooksDir {}: {}", folder, error.message()));
  }
  std::sort(hooks.begin(), hooks.end());
  return hooks;
}

// The owner in the image's /etc/passwd, as enroot adds them, so that `id`,
// `whoami` and ssh know who they are.
void AddOwner(const std::string& root, const Account& owner) {
  const std::string passwd = root + "/etc/passwd";
  struct stat info {};
  if (::lstat(passwd.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return;
  const int fd = ::open(passwd.c_str(), O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  const std::string text = ReadAll(fd);
  if (text.find(fmt::format("\n{}:", owner.name)) == std::string::npos &&
      !text.starts_with(owner.name + ":")) {
    const std::string line = fmt::format(
        "{}{}:x:{}:{}::{}:{}\n", text.empty() || text.ends_with('\n') ? "" : "\n", owner.name,
        owner.uid, owner.gid, owner.home, owner.shell.empty() ? "/bin/sh" : owner.shell);
    (void)!::write(fd, line.data(), line.size());
  }
  ::close(fd);
}

[[noreturn]] void RunHolder(const HolderPlan& plan, int report, int in_use) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Nothing of the stepd's (the step's output stream, its event file) may
  // stay open here for the step's life: the report pipe goes to 3, the
  // image's in-use lock to 4, and all else closes.
  if (report != 3) {
    if (in_use == 3) in_use = ::fcntl(in_use, F_DUPFD_CLOEXEC, 5);
    if (::dup3(report, 3, O_CLOEXEC) < 0) ::_exit(1);
    report = 3;
  }
  if (in_use >= 0 && in_use != 4 && ::dup3(in_use, 4, O_CLOEXEC) < 0) {
    HolderFails(report, Errno("cannot keep the image's lock"));
  }
  ::closefrom(in_use >= 0 ? 5 : 4);
  if (::unshare(CLONE_NEWNS) != 0) HolderFails(report, Errno("cannot make a mount namespace"));
  MountOrFail(report, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr, "/ private");
  const std::string upper = plan.base + "/upper";
  const std::string work = plan.base + "/work";
  const std::string root = plan.base + "/root";
  for (const std::string& folder : {upper, work, root}) {
    if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
      HolderFails(report, Errno(fmt::format("cannot make {}", folder)));
    }
  }
  for (const std::string& path : {plan.lower, upper, work}) {
    if (path.find_first_of(",:") != std::string::npos) {
      HolderFails(report, fmt::format("{} holds , or :, which an overlay cannot take; move "
                                      "ContainerCacheDir or the spool",
                                      path));
    }
  }
  const std::string overlay =
      fmt::format("lowerdir={},upperdir={},workdir={}", plan.lower, upper, work);
  MountOrFail(report, "overlay", root, "overlay", 0, overlay.c_str(), "the image");

  MakeMountPoint(report, root, "/proc", true);
  MountOrFail(report, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr,
              "proc");
  MakeMountPoint(report, root, "/sys", true);
  MountOrFail(report, "/sys", root + "/sys", nullptr, MS_BIND | MS_REC, nullptr, "/sys");
  MountOrFail(report, nullptr, root + "/sys", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr,
              "/sys");

  // /dev: only the basic devices and the step's GPUs exist.
  MakeMountPoint(report, root, "/dev", true);
  MountOrFail(report, "tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m",
              "/dev");
  for (const std::string_view name : kBasicDevices) {
    BindDevice(report, root, fmt::format("/dev/{}", name));
  }
  if (!plan.devices.empty()) {
    for (const std::string_view name : kGpuControlDevices) {
      BindDevice(report, root, fmt::format("/dev/{}", name));
    }
  }
  for (const std::string& device : plan.devices) BindDevice(report, root, device);
  MakeMountPoint(report, root, "/dev/pts", true);
  MountOrFail(report, "devpts", root + "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620", "/dev/pts");
  MakeMountPoint(report, root, "/dev/shm", true);
  MountOrFail(report, "tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777",
              "/dev/shm");
  for (const auto& [name, target] :
       {std::pair{"/dev/ptmx", "pts/ptmx"}, std::pair{"/dev/fd", "/proc/self/fd"},
        std::pair{"/dev/stdin", "/proc/self/fd/0"}, std::pair{"/dev/stdout", "/proc/self/fd/1"},
        std::pair{"/dev/stderr", "/proc/self/fd/2"}}) {
    (void)::symlink(target, (root + name).c_str());
  }

  for (const std::string_view file : {"/etc/hosts", "/etc/resolv.conf", "/etc/hostname"}) {
    BindHostFile(report, root, std::string(file));
  }
  if (plan.owner && plan.owner->uid != 0) AddOwner(root, *plan.owner);
  if (plan.mount_home && plan.owner && !plan.owner->home.empty()) {
    BindInto(report, root, plan.owner->home, plan.owner->home, container::Mount{}, plan.owner);
  }
  for (const container::Mount& mount : plan.mounts) {
    if (mount.source == "tmpfs") {
      MakeMountPoint(report, root, mount.target, true);
      MountOrFail(report, "tmpfs", root + mount.target, "tmpfs",
                  MS_NOSUID | MS_NODEV | (mount.read_only ? MS_RDONLY : 0), "mode=1777", "tmpfs");
      continue;
    }
    const std::string source =
        mount.source.starts_with('/')
            ? mount.source
            : (std::filesystem::path(plan.work_dir) / mount.source).lexically_normal().string();
    BindInto(report, root, source, mount.target, mount, plan.owner);
  }
  if (!plan.pmix_folder.empty()) {
    MakeMountPoint(report, root, plan.pmix_folder, true);
    MountOrFail(report, plan.pmix_folder.c_str(), root + plan.pmix_folder, nullptr, MS_BIND,
                nullptr, "the PMIx server's folder");
  }
  // The site's hooks last, on the finished tree: the GPU driver's
  // libraries and tools come in this way.
  if (!plan.hooks_dir.empty()) {
    for (const std::string& hook : Hooks(report, plan.hooks_dir)) RunHook(report, plan, root, hook);
  }
  if (!plan.writable) {
    MountOrFail(report, nullptr, root, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr,
                "the image read-only");
  }

  // Into it: the node's tree goes, the container's root stays.
  if (::chdir(root.c_str()) != 0) HolderFails(report, Errno("cannot enter the root"));
  if (::syscall(SYS_pivot_root, ".", ".") != 0) HolderFails(report, Errno("cannot pivot_root"));
  if (::umount2(".", MNT_DETACH) != 0) HolderFails(report, Errno("cannot leave the node's tree"));
  (void)!::chdir("/");
  // Ready: the pipe closes with nothing said.
  ::close(report);
  // Held until the stepd ends it, or dies.
  while (true) ::pause();
}

// The named container's folder (--container-name) under the job's state
// folder, locked for this step; or the launch's own.
struct Base {
  std::string path;
  int lock_fd = -1;
  bool existed = false;
  /// Another step of the job runs in the named container: its holder, to
  /// join (pid and start time, from the folder's `holder` file).
  pid_t running = -1;
  std::int64_t running_since = 0;
};

// The holder of the step that runs in a named container now, as that step
// wrote it: "PID START_TIME"; nullopt when none is recorded or it is gone.
std::optional<std::pair<pid_t, std::int64_t>> RunningHolder(const std::string& base) {
  const int fd = ::open((base + "/holder").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  const std::string text = ReadAll(fd);
  ::close(fd);
  long long pid = 0;
  long long since = 0;
  if (std::sscanf(text.c_str(), "%lld %lld", &pid, &since) != 2 || pid <= 1) return std::nullopt;
  if (!ProcessAlive(static_cast<pid_t>(pid), since)) return std::nullopt;
  return std::pair{static_cast<pid_t>(pid), static_cast<std::int64_t>(since)};
}

absl::StatusOr<Base> ContainerBase(const LaunchFile& file, const std::string& folder) {
  const ContainerSetup& c = file.container;
  if (c.name.empty()) {
    Base base{.path = folder + "/container"};
    if (::mkdir(base.path.c_str(), 0700) != 0 && errno != EEXIST) {
      return Failed(absl::StatusCode::kInternal, file.node,
                    Errno(fmt::format("cannot make {}", base.path)));
    }
    return base;
  }
  absl::StatusOr<container::ContainerName> name = container::ParseContainerName(c.name);
  if (!name.ok())
    return Failed(absl::StatusCode::kInvalidArgument, file.node,
                  std::string(name.status().message()));
  std::error_code error;
  std::filesystem::create_directories(c.state_dir, error);
  if (error) {
    return Failed(absl::StatusCode::kInternal, file.node,
                  fmt::format("cannot make {}: {}", c.state_dir, error.message()));
  }
  using container::NameMode;
  Base base{.path = fmt::format("{}/{}", c.state_dir, name->name)};
  base.existed = std::filesystem::exists(base.path + "/upper", error);
  if (name->mode == NameMode::kNoCreate && !base.existed) {
    return Failed(absl::StatusCode::kNotFound, file.node,
                  fmt::format("no container {:?} of this job on this node; make it first in an "
                              "earlier step (--container-name={} with --container-image)",
                              name->name, name->name));
  }
  std::filesystem::create_directories(base.path, error);
  // The step that makes the container holds its lock while it runs; a step
  // that finds it taken joins that step's container (pyxis's exec), or is
  // refused when its flag forbids joining.
  const std::string lock = base.path + "/lock";
  base.lock_fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (base.lock_fd >= 0 && ::flock(base.lock_fd, LOCK_EX | LOCK_NB) == 0) {
    if (name->mode == NameMode::kExec) {
      ::close(base.lock_fd);
      return Failed(absl::StatusCode::kNotFound, file.node,
                    fmt::format("no step of this job runs in container {:?} on this node, so "
                                "there is none to join (:exec); drop :exec to start it",
                                name->name));
    }
    if (name->mode == NameMode::kCreate && base.existed) {
      std::filesystem::remove_all(base.path + "/upper", error);
      std::filesystem::remove_all(base.path + "/work", error);
      base.existed = false;
    }
    return base;
  }
  if (base.lock_fd >= 0) ::close(base.lock_fd);
  base.lock_fd = -1;
  const std::optional<std::pair<pid_t, std::int64_t>> running = RunningHolder(base.path);
  if (name->mode == NameMode::kNoExec || name->mode == NameMode::kCreate || !running) {
    return Failed(absl::StatusCode::kFailedPrecondition, file.node,
                  fmt::format("container {:?} is in use by another step of this job on this "
                              "node; join it (--container-name={}:exec), wait for it, or give "
                              "this step another --container-name",
                              name->name, name->name));
  }
  base.running = running->first;
  base.running_since = running->second;
  return base;
}

// The image a named container was made from, kept beside it for the job's
// later steps that name only the container.
std::string ImageOfNamed(const Base& base, const std::string& asked) {
  const std::string path = base.path + "/image";
  if (!asked.empty()) {
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      (void)!::write(fd, asked.data(), asked.size());
      ::close(fd);
    }
    return asked;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return {};
  std::string text = ReadAll(fd);
  ::close(fd);
  return text;
}

std::string PathOf(const std::vector<std::string>& env) {
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) return entry.substr(5);
  }
  return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

}  // namespace

void MergeImageEnvironment(std::vector<std::string>& env, const std::vector<std::string>& image,
                           const std::vector<std::string>& keep) {
  const std::set<std::string_view> kept(keep.begin(), keep.end());
  for (const std::string_view entry : image) {
    const std::size_t equals = entry.find('=');
    if (equals == std::string_view::npos || equals == 0) continue;
    const std::string_view name = entry.substr(0, equals);
    if (kept.contains(name)) {
      const bool on_host = std::any_of(env.begin(), env.end(), [&](const std::string& e) {
        return e.size() > name.size() && e.starts_with(name) && e[name.size()] == '=';
      });
      if (on_host) continue;
    }
    SetVariable(env, name, entry.substr(equals + 1));
  }
}

absl::StatusOr<std::unique_ptr<StepContainer>> StepContainer::Start(
    const LaunchFile& file, const std::string& folder, const std::optional<Account>& owner,
    const std::function<void(const ImageEvent&)>& on_image) {
  const ContainerSetup& c = file.container;
  if (::geteuid() != 0) {
    return Failed(absl::StatusCode::kFailedPrecondition, file.node,
                  "containers need cohort-agent to run as root (it makes their mounts)");
  }
  absl::StatusOr<std::vector<container::Mount>> mounts =
      c.mounts.empty() ? std::vector<container::Mount>{} : container::ParseMounts(c.mounts);
  if (!mounts.ok()) {
    return Failed(absl::StatusCode::kInvalidArgument, file.node,
                  std::string(mounts.status().message()));
  }
  absl::StatusOr<std::vector<std::string>> keep =
      c.env.empty() ? std::vector<std::string>{} : container::ParseEnvNames(c.env);
  if (!keep.ok())
    return Failed(absl::StatusCode::kInvalidArgument, file.node,
                  std::string(keep.status().message()));

  absl::StatusOr<Base> base = ContainerBase(file, folder);
  if (!base.ok()) return base.status();
  std::unique_ptr<StepContainer> made(new StepContainer());
  if (base->running > 0) {
    // Another step of the job runs in the named container: this step's
    // ranks join it, as it is (its mounts, its image, its changes).
    const std::string named = ImageOfNamed(*base, "");
    std::optional<ImageInfo> pinned = named.empty() ? std::nullopt : PinnedImage(c, named);
    if (!pinned) {
      return Failed(absl::StatusCode::kNotFound, file.node,
                    fmt::format("container {:?} runs, but its image is not in this node's cache "
                                "any more; run this step once the other has ended",
                                c.name));
    }
    made->joined_ = base->running;
    made->joined_since_ = base->running_since;
    made->image_ = *std::move(pinned);
    made->keep_ = *std::move(keep);
    if (!c.mounts.empty() || c.mount_home || !c.image.empty()) {
      made->notice_ = fmt::format(
          "this step joins container {:?}, which another step of the job runs on {}: its "
          "--container-image, --container-mounts and --container-mount-home are ignored",
          container::ParseContainerName(c.name)->name, file.node);
    }
    return made;
  }
  made->lock_fd_ = base->lock_fd;
  const std::string reference = c.name.empty() ? c.image : ImageOfNamed(*base, c.image);
  if (reference.empty()) {
    return Failed(
        absl::StatusCode::kNotFound, file.node,
        fmt::format("container {:?} has no image on this node; give --container-image", c.name));
  }
  // The image is in use while the holder lives: the cache's eviction skips
  // it (cohort-image's in-use lock, which the holder keeps). Another
  // step's pull may evict it between this pull and the lock: then once more.
  absl::StatusOr<ImageInfo> image;
  int in_use_fd = -1;
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&started] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 started)
        .count();
  };
  for (int attempt = 0; attempt < 2 && in_use_fd < 0; ++attempt) {
    if (std::optional<ImageInfo> pinned = attempt == 0 ? PinnedImage(c, reference) : std::nullopt) {
      image = *std::move(pinned);
      image->cached = true;
    } else {
      image = PullImage(file, reference, owner);
      if (!image.ok()) {
        on_image({.outcome = ImageOutcome::kFailed, .bytes = 0, .ms = elapsed_ms()});
        return image.status();
      }
      PinImage(c, reference, *image);
    }
    const std::string in_use =
        std::filesystem::path(image->rootfs).parent_path().string() + "/in-use.lock";
    in_use_fd = ::open(in_use.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    struct stat info {};
    if (in_use_fd >= 0 &&
        (::flock(in_use_fd, LOCK_SH) != 0 || ::stat(image->rootfs.c_str(), &info) != 0)) {
      ::close(in_use_fd);
      in_use_fd = -1;
    }
  }
  made->in_use_fd_ = in_use_fd;  // closed with `made` on every path out
  if (image.ok()) {
    on_image({.outcome = image->cached ? ImageOutcome::kCached : ImageOutcome::kPulled,
              .bytes = image->cached ? 0 : image->bytes,
              .ms = elapsed_ms()});
  }
  if (in_use_fd < 0) {
    return Failed(absl::StatusCode::kUnavailable, file.node,
                  fmt::format("image {:?} left the node's cache as soon as it was pulled; raise "
                              "ContainerCacheMaxGB",
                              reference));
  }

  HolderPlan plan{.node = file.node,
                  .lower = image->rootfs,
                  .base = base->path,
                  .writable = c.writable,
                  .mounts = *std::move(mounts),
                  .work_dir = file.work_dir,
                  .owner = owner,
                  .mount_home = c.mount_home,
                  .devices = c.devices,
                  .pmix_folder = {},
                  .hooks_dir = c.hooks_dir,
                  .gpu_indices = {}};
  // The step's GPUs by the node's indices, for NVIDIA_VISIBLE_DEVICES.
  if (!file.ranks.empty()) {
    for (const std::string& entry : file.ranks.front().env) {
      if (entry.starts_with("SLURM_JOB_GPUS=")) plan.gpu_indices = entry.substr(15);
    }
  }
  if (file.mpi.type == "pmix") {
    plan.pmix_folder = folder + "/pmix";
    if (::mkdir(plan.pmix_folder.c_str(), 0700) != 0 && errno != EEXIST) {
      return Failed(absl::StatusCode::kInternal, file.node,
                    Errno(fmt::format("cannot make {}", plan.pmix_folder)));
    }
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return Failed(absl::StatusCode::kInternal, file.node, Errno("cannot make a pipe"));
  }
  const pid_t holder = ::fork();
  if (holder == 0) {
    ::close(report[0]);
    RunHolder(plan, report[1], in_use_fd);
  }
  ::close(report[1]);
  if (holder < 0) {
    ::close(report[0]);
    return Failed(absl::StatusCode::kInternal, file.node, Errno("cannot start the container"));
  }
  made->holder_ = holder;
  made->report_fd_ = report[0];
  if (!c.name.empty()) {
    // Where the job's later steps find the container while this one runs.
    const std::optional<ProcessStat> stat = ReadProcessStat(holder);
    const std::string text = fmt::format("{} {}", holder, stat ? stat->start_time : 0);
    const std::string path = base->path + "/holder";
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      (void)!::write(fd, text.data(), text.size());
      ::close(fd);
    }
  }
  made->image_ = *std::move(image);
  made->keep_ = *std::move(keep);
  return made;
}

absl::Status StepContainer::Ready(LaunchFile& file) {
  const ContainerSetup& c = file.container;
  if (joined_ > 0) {
    if (!ProcessAlive(joined_, joined_since_)) {
      return Failed(absl::StatusCode::kFailedPrecondition, file.node,
                    fmt::format("the step that ran container {:?} ended before this one joined "
                                "it; run this step again",
                                c.name));
    }
  } else {
    const std::string why = ReadAll(report_fd_);
    ::close(report_fd_);
    report_fd_ = -1;
    ::close(in_use_fd_);  // the holder keeps its copy
    in_use_fd_ = -1;
    if (!why.empty()) return Failed(absl::StatusCode::kFailedPrecondition, file.node, why);
  }
  entry_.namespace_fd =
      ::open(fmt::format("/proc/{}/ns/mnt", RootPid()).c_str(), O_RDONLY | O_CLOEXEC);
  if (entry_.namespace_fd < 0) {
    return Failed(absl::StatusCode::kInternal, file.node,
                  Errno("cannot open the container's mount namespace"));
  }
  // The working directory: --container-workdir, else the job's when the
  // container has it (a mounted folder), else the image's.
  if (!c.workdir.empty()) {
    entry_.work_dir = c.workdir;
  } else {
    struct stat info {};
    const std::string job_dir = fmt::format("/proc/{}/root{}", RootPid(), file.work_dir);
    entry_.work_dir = ::stat(job_dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) ? file.work_dir
                      : image_.working_dir.empty()                                 ? "/"
                                                   : image_.working_dir;
  }
  entry_.remap_root = c.remap_root;
  for (RankLaunch& rank : file.ranks) MergeImageEnvironment(rank.env, image_.env, keep_);
  entry_.search_path = PathOf(file.ranks.empty() ? image_.env : file.ranks.front().env);
  if (c.entrypoint && !image_.entrypoint.empty()) {
    file.argv.insert(file.argv.begin(), image_.entrypoint.begin(), image_.entrypoint.end());
  }
  return absl::OkStatus();
}

absl::Status StepContainer::Save(const std::string& path, const std::string& work_dir,
                                 const std::optional<Account>& owner,
                                 const std::string& node) const {
  if (RootPid() <= 0) return Failed(absl::StatusCode::kInternal, node, "no container to save");
  const std::string target = path.starts_with('/') ? path : work_dir + "/" + path;
  // Everything the child uses is made before the fork: the stepd may have
  // threads (the step's I/O, PMIx), and only exec is safe after it.
  constexpr int kTargetFd = 3;
  std::vector<std::string> args = {"mksquashfs",
                                   fmt::format("/proc/{}/root/", RootPid()),
                                   fmt::format("/proc/self/fd/{}", kTargetFd),
                                   "-noappend",
                                   "-no-progress",
                                   "-quiet",
                                   "-one-file-system"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const bool as_owner = owner && owner->uid != 0;
  int said[2];
  if (::pipe2(said, O_CLOEXEC) != 0) {
    return Failed(absl::StatusCode::kInternal, node, Errno("cannot make a pipe"));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(said[1], STDOUT_FILENO);
    ::dup2(said[1], STDERR_FILENO);
    // The file is the owner's: created as them, where they may write.
    if (as_owner && (::setgroups(owner->groups.size(), owner->groups.data()) != 0 ||
                     ::setegid(owner->gid) != 0 || ::seteuid(owner->uid) != 0)) {
      ::_exit(125);
    }
    const int fd =
        ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NOCTTY, 0644);
    if (fd < 0) {
      const char* why = std::strerror(errno);
      (void)!::write(STDERR_FILENO, "cannot create ", 14);
      (void)!::write(STDERR_FILENO, target.data(), target.size());
      (void)!::write(STDERR_FILENO, ": ", 2);
      (void)!::write(STDERR_FILENO, why, std::strlen(why));
      ::_exit(126);
    }
    if (fd != kTargetFd && (::dup2(fd, kTargetFd) < 0 || ::close(fd) != 0)) ::_exit(125);
    // Root again to read the container's every file.
    if (as_owner && (::seteuid(0) != 0 || ::setegid(0) != 0 || ::setgroups(0, nullptr) != 0)) {
      ::_exit(125);
    }
    ::execvp(argv.front(), argv.data());
    (void)!::write(STDERR_FILENO, "cannot run mksquashfs; install squashfs-tools", 45);
    ::_exit(127);
  }
  ::close(said[1]);
  if (pid < 0) {
    ::close(said[0]);
    return Failed(absl::StatusCode::kInternal, node, Errno("cannot fork"));
  }
  const std::string output = ReadAll(said[0]);
  ::close(said[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string last(LastLine(output));
  return Failed(
      absl::StatusCode::kFailedPrecondition, node,
      fmt::format("--container-save {}: {}", target,
                  !last.empty() ? last
                  : WIFEXITED(status)
                      ? fmt::format("mksquashfs exited with {}", WEXITSTATUS(status))
                      : fmt::format("mksquashfs was killed by signal {}", WTERMSIG(status))));
}

StepContainer::~StepContainer() {
  if (entry_.namespace_fd >= 0) ::close(entry_.namespace_fd);
  if (holder_ > 0) {
    ::kill(holder_, SIGKILL);
    while (::waitpid(holder_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  if (in_use_fd_ >= 0) ::close(in_use_fd_);
  if (report_fd_ >= 0) ::close(report_fd_);
}

}  // namespace cohort::step
