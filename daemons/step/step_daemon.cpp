// SPDX-License-Identifier: Apache-2.0
#include "step_daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/fmt_absl.h"
#include "job_cgroup.h"
#include "launch_file.h"
#include "mpi_wireup.h"
#include "proc_stat.h"
#include "rank_spawner.h"
#include "run_as.h"
#include "step_container.h"
#include "step_events.h"
#include "step_io.h"

namespace cohort::step {
namespace {

// How long the stepd waits for the killed leftovers of a launch to leave
// its cgroup before it gives up removing the folder.
constexpr std::chrono::seconds kCgroupRemoveWait{10};

// The stepd's own diagnostics go to stderr: the agent points it at
// `stepd.log` in the launch's folder.
template <typename... Args>
void Complain(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "cohort-stepd: {}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::Status(absl::ErrnoToStatusCode(error),
                          fmt::format("cannot read {}: {}", path, std::strerror(error)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

// The event file and the agent's socket: each event is one write of one
// line (O_APPEND), then a datagram naming the folder. The datagram only
// wakes the agent, so its errors (no agent listening, a full queue) are
// ignored: the agent also reads every launch's file each second.
class EventLog {
 public:
  explicit EventLog(std::string folder) : folder_(std::move(folder)) {}
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog() {
    if (fd_ >= 0) ::close(fd_);
    if (socket_ >= 0) ::close(socket_);
  }

  bool Open() {
    const std::string path = folder_ + "/events";
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) Complain("cannot open {}: {}", path, std::strerror(errno));
    return fd_ >= 0;
  }

  void SetAgentSocket(const std::string& path) {
    if (path.empty() || path.size() >= sizeof(address_.sun_path)) return;
    socket_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    address_.sun_family = AF_UNIX;
    std::memcpy(address_.sun_path, path.c_str(), path.size() + 1);
  }

  void Append(const StepEvent& event) {
    Write(event);
    // The agent acts on neither: a launch of many ranks must not fill the
    // socket's queue with them ahead of `pgid`.
    if (std::holds_alternative<StepdEvent>(event) ||
        std::holds_alternative<RankStartedEvent>(event)) {
      return;
    }
    if (socket_ >= 0) {
      (void)::sendto(socket_, folder_.data(), folder_.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                     reinterpret_cast<const sockaddr*>(&address_), sizeof address_);
    }
  }

 private:
  void Write(const StepEvent& event) {
    const std::string line = FormatStepEvent(event);
    std::string_view rest = line;
    while (!rest.empty()) {
      const ssize_t written = ::write(fd_, rest.data(), rest.size());
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        Complain("cannot append to {}/events: {}", folder_, std::strerror(errno));
        return;
      }
      rest.remove_prefix(static_cast<std::size_t>(written));
    }
  }

  std::string folder_;
  int fd_ = -1;
  int socket_ = -1;
  sockaddr_un address_{};
};

// Reaps the ranks of `live` (pid → rank) until none is left, logging each
// exit. The stepd has no other children.
void ReapAll(std::map<pid_t, int> live, const std::function<void(const RankExitEvent&)>& on_exit) {
  while (!live.empty()) {
    int status = 0;
    struct rusage usage {};
    const pid_t pid = ::wait4(-1, &status, 0, &usage);
    if (pid < 0) {
      if (errno == EINTR) continue;
      Complain("waitpid: {}; {} ranks unaccounted for", std::strerror(errno), live.size());
      return;
    }
    const auto it = live.find(pid);
    if (it == live.end()) continue;
    on_exit(ExitOf(it->second, status, usage));
    live.erase(it);
  }
}

// The ranks that called their MPI server's abort, and the status each
// asked to end with. A PMI-1 client waits for its process manager to end
// it (MPICH's PMI_Abort returns, and the rank runs on, when nobody does):
// the stepd kills the rank and reports its exit with the status.
class Aborts {
 public:
  /// The ranks' pids, once they run.
  void Started(const std::vector<RankStartedEvent>& started) {
    const std::lock_guard lock(mutex_);
    for (const RankStartedEvent& rank : started) {
      pids_[rank.rank] = rank.pid;
      // One that aborted before all were started.
      if (all_killed_ || statuses_.contains(rank.rank)) ::kill(rank.pid, SIGKILL);
    }
  }
  /// Said in the rank's output (`api` names the call), then the rank is killed.
  std::function<void(int, int, const std::string&)> Handler(StepIoForwarder& io,
                                                            std::string_view api) {
    return [this, &io, api](int rank, int status, const std::string& message) {
      io.Queue({.kind = io::FrameKind::kStderr,
                .rank = rank,
                .data = fmt::format("cohort-stepd: rank {} called {} with status {}{}{}\n", rank,
                                    api, status, message.empty() ? "" : ": ", message)});
      const std::lock_guard lock(mutex_);
      statuses_[rank] = status;
      if (const auto it = pids_.find(rank); it != pids_.end()) ::kill(it->second, SIGKILL);
    };
  }
  /// Kills every rank, those started later too (a failed fence).
  void KillAll() {
    const std::lock_guard lock(mutex_);
    all_killed_ = true;
    for (const auto& [rank, pid] : pids_) ::kill(pid, SIGKILL);
  }
  /// The rank's exit as its abort asked: its status, not the kill.
  RankExitEvent Reported(RankExitEvent exit) const {
    const std::lock_guard lock(mutex_);
    if (const auto it = statuses_.find(exit.rank); it != statuses_.end()) {
      exit.exit_code = it->second != 0 ? it->second : 1;
      exit.signal = 0;
    }
    return exit;
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, pid_t> pids_;
  std::map<int, int> statuses_;
  bool all_killed_ = false;
};

}  // namespace

int RunStepDaemon(const std::string& folder) {
  // Its own session: the agent's end (or its terminal's) must not take the
  // ranks along, and signals to the ranks' group never reach the stepd.
  ::setsid();
  EventLog events(folder);
  if (!events.Open()) return 1;
  const std::optional<ProcessStat> self = ReadProcessStat(::getpid());
  events.Append(StepdEvent{::getpid(), self ? self->start_time : 0});

  const std::string launch_path = folder + "/launch.json";
  absl::StatusOr<LaunchFile> file = [&]() -> absl::StatusOr<LaunchFile> {
    absl::StatusOr<std::string> text = ReadWholeFile(launch_path);
    if (!text.ok()) return text.status();
    return ParseLaunchFile(*text);
  }();
  if (!file.ok()) {
    Complain("{}", file.status().message());
    // The node's name is unknown without the file; the agent's folder has it.
    events.Append(FailedEvent{fmt::format("cohort-stepd: {}", file.status().message())});
    events.Append(DoneEvent{});
    return 0;
  }
  events.SetAgentSocket(file->agent_socket);

  // --container-image: the image pulled (or found in the node's cache) and
  // the container's holder started, before any thread starts, so that it
  // may fork; it builds the container while the output stream is dialled.
  std::unique_ptr<StepContainer> container;
  std::optional<Account> owner;
  if (file->container.Enabled()) {
    absl::StatusOr<std::unique_ptr<StepContainer>> made = [&] {
      if (file->run_as == RunAs::kOwner) {
        absl::StatusOr<Account> found = LookupAccount(file->uid, file->node);
        if (!found.ok()) return absl::StatusOr<std::unique_ptr<StepContainer>>(found.status());
        owner = *std::move(found);
      }
      return StepContainer::Start(*file, folder, owner,
                                  [&](const ImageEvent& image) { events.Append(image); });
    }();
    if (!made.ok()) {
      Complain("{}", made.status().message());
      events.Append(FailedEvent{std::string(made.status().message())});
      events.Append(DoneEvent{});
      return 0;
    }
    container = *std::move(made);
  }

  // A step's output goes to its `cohort run` over the network: dialled
  // before any rank starts, so that none of it is lost.
  std::unique_ptr<StepIoForwarder> io;
  if (!file->io.address.empty()) {
    absl::StatusOr<std::unique_ptr<StepIoForwarder>> opened = StepIoForwarder::Open(*file);
    if (!opened.ok()) {
      Complain("{}", opened.status().message());
      events.Append(FailedEvent{fmt::format("{}: {}", file->node, opened.status().message())});
      events.Append(DoneEvent{});
      return 0;
    }
    io = *std::move(opened);
  }

  if (container && !container->Notice().empty()) {
    Complain("{}", container->Notice());
    if (io && !file->ranks.empty()) {
      io->Queue({.kind = io::FrameKind::kStderr,
                 .rank = file->ranks.front().rank,
                 .data = fmt::format("cohort-stepd: {}\n", container->Notice())});
    }
  }
  if (container) {
    if (absl::Status ready = container->Ready(*file); !ready.ok()) {
      Complain("{}", ready.message());
      events.Append(FailedEvent{std::string(ready.message())});
      events.Append(DoneEvent{});
      return 0;
    }
  }

  // srun --mpi=pmix or pmi2: the ranks' PMIx or PMI server, whose fences
  // go over the step's fence tree; each rank learns where it is from its
  // environment (and a PMI rank finds its socket as PMI_FD).
  Aborts aborts;
  std::unique_ptr<MpiWireUp> mpi;
  std::vector<RankStdio> stdio;
  if (io) stdio = io->ChildEnds();
  if (!file->mpi.type.empty()) {
    absl::StatusOr<std::unique_ptr<MpiWireUp>> started =
        io ? MpiWireUp::Start(
                 folder, *file, *io, [&](std::string_view api) { return aborts.Handler(*io, api); },
                 // Said in the first rank's output already.
                 [&](const std::string& /*why*/) { aborts.KillAll(); })
           : absl::FailedPreconditionError(
                 fmt::format("--mpi={} needs the step's stream to srun, which starts its wire-up",
                             file->mpi.type));
    if (!started.ok()) {
      Complain("{}", started.status().message());
      events.Append(FailedEvent{fmt::format("{}: {}", file->node, started.status().message())});
      events.Append(DoneEvent{});
      return 0;
    }
    mpi = *std::move(started);
    // A PMI socket for each rank, beside its pipes or its files.
    if (file->mpi.type == "pmi2") stdio.resize(file->ranks.size());
    for (std::size_t i = 0; i < stdio.size(); ++i) {
      if (const int end = mpi->PmiChildEnd(file->ranks[i].rank); end >= 0) stdio[i].pmi = end;
    }
  }

  SpawnResult spawned = SpawnRanks(
      *file, [&](const RankStartedEvent& started) { events.Append(started); }, stdio,
      container ? &container->Entry() : nullptr);
  if (io) io->CloseChildEnds();
  if (mpi) mpi->CloseChildEnds();
  aborts.Started(spawned.started);
  std::map<pid_t, int> live;
  for (const RankStartedEvent& started : spawned.started) live.emplace(started.pid, started.rank);
  if (!spawned.status.ok()) {
    events.Append(FailedEvent{std::string(spawned.status.message())});
    // All or none: a gang with a rank missing cannot make progress.
    if (spawned.process_group > 0) ::killpg(spawned.process_group, SIGKILL);
    for (const std::string& cgroup : file->cgroups) KillCgroup(cgroup);
  } else {
    events.Append(GroupEvent{spawned.process_group});
  }
  // --container-save: the node of rank 0 saves the container as the ranks
  // left it, before it goes. Their exits are told once it is saved, so that
  // the step ends (and srun returns) with the file whole. A save that fails
  // says why in rank 0's error output and fails it (exit code 1).
  const bool saves = container && !file->container.save.empty() &&
                     std::any_of(file->ranks.begin(), file->ranks.end(),
                                 [](const RankLaunch& rank) { return rank.rank == 0; });
  std::vector<RankExitEvent> held;
  const auto exited = [&](const RankExitEvent& exit) {
    if (saves) {
      held.push_back(exit);
    } else {
      events.Append(exit);
    }
  };
  bool save_failed = false;
  const auto save = [&] {
    if (!saves) return;
    absl::Status saved = container->Save(file->container.save, file->work_dir, owner, file->node);
    if (saved.ok()) return;
    save_failed = true;
    Complain("{}", saved.message());
    if (io) {
      io->Queue({.kind = io::FrameKind::kStderr,
                 .rank = 0,
                 .data = fmt::format("cohort-stepd: {}\n", saved.message())});
    }
  };
  if (io) {
    io->Run(
        std::move(live), [&](const RankExitEvent& exit) { exited(aborts.Reported(exit)); }, save);
  } else {
    ReapAll(std::move(live), exited);
    save();
  }
  for (RankExitEvent& exit : held) {
    if (save_failed && exit.rank == 0 && exit.exit_code == 0 && exit.signal == 0) {
      exit.exit_code = 1;
    }
    events.Append(exit);
  }
  // What the ranks left behind (a daemon that left their process group)
  // ends with the launch, before the node is reported free.
  for (const std::string& cgroup : file->cgroups) {
    if (absl::Status removed = RemoveCgroup(cgroup, kCgroupRemoveWait); !removed.ok()) {
      Complain("{}", removed.message());
    }
  }
  events.Append(DoneEvent{});
  return 0;
}

}  // namespace cohort::step
