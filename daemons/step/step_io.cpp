// SPDX-License-Identifier: Apache-2.0
#include "step_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "cohort/launch/io_frame.h"
#include "psk_link.h"
#include "tls_session.h"

namespace cohort::step {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kConnectWait{10};
// How long output is still read once every rank is reaped: a process the
// ranks left behind may hold their pipes open for good.
constexpr std::chrono::seconds kDrainWait{2};
constexpr std::size_t kReadSize = 64 * 1024;
// Stdin held for a rank that does not read it yet, before the stepd stops
// reading more from `cohort run`.
constexpr std::size_t kStdinBacklog = 1U << 20;

// SIGCHLD wakes the poll through this pipe's write end.
int child_wake_fd = -1;
extern "C" void OnChild(int /*signal*/) {
  const int saved = errno;
  const char byte = 0;
  (void)::write(child_wake_fd, &byte, 1);
  errno = saved;
}

absl::Status Unreachable(const std::string& address, const std::string& why) {
  return absl::UnavailableError(fmt::format(
      "cannot reach cohort run at {} for the step's output: {}; if this node cannot reach the "
      "host it runs on at that address, set COHORT_IO_ADDRESS there to one it can",
      address, why));
}

// The stream to `cohort run`, dialled and secured within kConnectWait.
absl::StatusOr<std::pair<int, std::unique_ptr<tls::TlsSession>>> Connect(const LaunchFile& file) {
  absl::StatusOr<int> fd = DialTcp(file.io.address, kConnectWait);
  if (!fd.ok()) return Unreachable(file.io.address, std::string(fd.status().message()));
  absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
      SecureWithKey(*fd, file.io.key, kConnectWait);
  if (!session.ok()) {
    ::close(*fd);
    if (absl::IsInvalidArgument(session.status())) return session.status();
    return Unreachable(file.io.address,
                       fmt::format("{} (is it the cohort run that started the step?)",
                                   std::string(session.status().message())));
  }
  return std::pair{*fd, *std::move(session)};
}

}  // namespace

struct StepIoForwarder::Pipe {
  int fd = -1;
  int rank = 0;
  io::FrameKind kind = io::FrameKind::kStdout;  ///< kStdin: the stepd writes to it
  std::string pending{};                        ///< stdin not yet written
  bool ended = false;                           ///< stdin: close once pending is written

  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

absl::StatusOr<std::unique_ptr<StepIoForwarder>> StepIoForwarder::Open(const LaunchFile& file) {
  std::unique_ptr<StepIoForwarder> io(new StepIoForwarder());
  // TLS writes with write(2): a `cohort run` that has gone must not end the
  // stepd by SIGPIPE (ranks start with the default again).
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::pair<int, std::unique_ptr<tls::TlsSession>>> link = Connect(file);
  if (!link.ok()) return link.status();
  io->socket_ = link->first;
  io->tls_ = std::move(link->second);
  // Blocking from here: Send waits for `cohort run` to take the output.
  ::fcntl(io->socket_, F_SETFL, ::fcntl(io->socket_, F_GETFL) & ~O_NONBLOCK);
  io->connected_ = true;
  // -o/-e with --mpi: the ranks write their files; the stream is the
  // wire-up's and the stepd's.
  io->stdin_rank_ = file.io.files ? -1 : file.io.stdin_rank;
  if (::pipe2(io->queue_wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("{}: cannot make a pipe: {}", file.node, std::strerror(errno)));
  }
  const io::Hello hello{.key = file.io.key,
                        .job = file.job_id,
                        .step = file.step,
                        .node = file.node,
                        .first_rank = file.ranks.empty() ? 0 : file.ranks.front().rank,
                        .ranks = static_cast<int>(file.ranks.size())};
  io->Send(static_cast<int>(io::FrameKind::kHello), -1, io::EncodeHello(hello));
  for (const RankLaunch& rank :
       file.io.files ? std::span<const RankLaunch>() : std::span<const RankLaunch>(file.ranks)) {
    RankStdio& ends = io->child_ends_.emplace_back();
    for (const io::FrameKind kind : {io::FrameKind::kStdout, io::FrameKind::kStderr}) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        return absl::Status(
            absl::ErrnoToStatusCode(errno),
            fmt::format("{}: cannot make a pipe: {}", file.node, std::strerror(errno)));
      }
      (kind == io::FrameKind::kStdout ? ends.out : ends.err) = fds[1];
      io->pipes_.push_back(
          std::make_unique<Pipe>(Pipe{.fd = fds[0], .rank = rank.rank, .kind = kind}));
    }
    if (rank.rank == file.io.stdin_rank && file.io.pty) {
      // --pty: the rank's stdin, stdout and stderr are a terminal whose
      // master the stepd reads (output) and writes (stdin) through.
      const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      const char* slave =
          master < 0
              ? nullptr
              : (::grantpt(master) == 0 && ::unlockpt(master) == 0 ? ::ptsname(master) : nullptr);
      if (slave == nullptr) {
        return absl::Status(absl::ErrnoToStatusCode(errno),
                            fmt::format("{}: cannot make a pseudo-terminal for --pty: {}",
                                        file.node, std::strerror(errno)));
      }
      // The rank opens it once it is the job's owner.
      if (file.run_as == RunAs::kOwner) (void)::chown(slave, file.uid, static_cast<gid_t>(-1));
      ::close(ends.out);
      ::close(ends.err);
      io->pipes_.pop_back();
      io->pipes_.pop_back();
      ends = RankStdio{.pty = slave};
      const int writer = ::fcntl(master, F_DUPFD_CLOEXEC, 0);
      ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
      io->pty_master_ = master;
      io->pipes_.push_back(std::make_unique<Pipe>(
          Pipe{.fd = master, .rank = rank.rank, .kind = io::FrameKind::kStdout}));
      io->pipes_.push_back(std::make_unique<Pipe>(
          Pipe{.fd = writer, .rank = rank.rank, .kind = io::FrameKind::kStdin}));
    } else if (rank.rank == file.io.stdin_rank) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        return absl::Status(
            absl::ErrnoToStatusCode(errno),
            fmt::format("{}: cannot make a pipe: {}", file.node, std::strerror(errno)));
      }
      ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
      ends.in = fds[0];
      io->pipes_.push_back(std::make_unique<Pipe>(
          Pipe{.fd = fds[1], .rank = rank.rank, .kind = io::FrameKind::kStdin}));
    }
  }
  return io;
}

StepIoForwarder::~StepIoForwarder() {
  CloseChildEnds();
  for (const std::unique_ptr<Pipe>& pipe : pipes_) pipe->Close();
  if (socket_ >= 0) ::close(socket_);
  for (const int fd : queue_wake_) {
    if (fd >= 0) ::close(fd);
  }
}

std::string StepIoForwarder::Host() const { return LocalHost(socket_); }

void StepIoForwarder::Queue(io::Frame frame) {
  {
    const std::lock_guard lock(queue_mutex_);
    queued_.push_back(std::move(frame));
  }
  if (queue_wake_[1] >= 0) (void)::write(queue_wake_[1], "q", 1);
}

void StepIoForwarder::SendQueued() {
  std::vector<io::Frame> frames;
  {
    const std::lock_guard lock(queue_mutex_);
    frames.swap(queued_);
  }
  for (const io::Frame& frame : frames) {
    Send(static_cast<int>(frame.kind), frame.rank, frame.data);
  }
}

void StepIoForwarder::CloseChildEnds() {
  for (RankStdio& ends : child_ends_) {
    for (int* fd : {&ends.in, &ends.out, &ends.err}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
}

void StepIoForwarder::Send(int kind, int rank, std::string_view data) {
  if (!connected_) return;
  const std::string bytes = io::EncodeFrame(
      {.kind = static_cast<io::FrameKind>(kind), .rank = rank, .data = std::string(data)});
  std::string_view rest = bytes;
  while (!rest.empty()) {
    const tls::TlsSession::Step sent = tls_->Write(rest);
    if (sent.bytes <= 0) {
      // `cohort run` is gone: the ranks' output is dropped from now on.
      connected_ = false;
      return;
    }
    rest.remove_prefix(static_cast<std::size_t>(sent.bytes));
  }
}

void StepIoForwarder::Run(std::map<pid_t, int> live,
                          const std::function<void(const RankExitEvent&)>& on_exit,
                          const std::function<void()>& before_done) {
  int wake[2] = {-1, -1};
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) == 0) {
    child_wake_fd = wake[1];
    struct sigaction action {};
    action.sa_handler = OnChild;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &action, nullptr);
  }
  std::string inbox;
  std::optional<Clock::time_point> drain_until;
  char buffer[kReadSize];
  while (true) {
    int status = 0;
    pid_t pid = 0;
    struct rusage usage {};
    while ((pid = ::wait4(-1, &status, WNOHANG, &usage)) > 0) {
      const auto it = live.find(pid);
      if (it == live.end()) continue;
      on_exit(ExitOf(it->second, status, usage));
      live.erase(it);
    }
    if (live.empty()) {
      const bool output_open = std::any_of(pipes_.begin(), pipes_.end(), [](const auto& p) {
        return p->fd >= 0 && p->kind != io::FrameKind::kStdin;
      });
      if (!output_open) break;
      if (!drain_until) drain_until = Clock::now() + kDrainWait;
      if (Clock::now() >= *drain_until) break;
    }
    SendQueued();
    std::vector<pollfd> fds;
    std::vector<Pipe*> owners;  // null: a wake pipe or the socket
    if (wake[0] >= 0) {
      fds.push_back({wake[0], POLLIN, 0});
      owners.push_back(nullptr);
    }
    if (queue_wake_[0] >= 0) {
      fds.push_back({queue_wake_[0], POLLIN, 0});
      owners.push_back(nullptr);
    }
    std::size_t stdin_backlog = 0;
    for (const std::unique_ptr<Pipe>& pipe : pipes_) {
      if (pipe->fd < 0) continue;
      const bool input = pipe->kind == io::FrameKind::kStdin;
      if (input && pipe->pending.empty()) continue;
      stdin_backlog += pipe->pending.size();
      fds.push_back({pipe->fd, static_cast<short>(input ? POLLOUT : POLLIN), 0});
      owners.push_back(pipe.get());
    }
    const bool read_socket = connected_ && stdin_backlog < kStdinBacklog;
    if (read_socket) {
      fds.push_back({socket_, POLLIN, 0});
      owners.push_back(nullptr);
    }
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Pipe* pipe = owners[i];
      if (pipe == nullptr && (fds[i].fd == wake[0] || fds[i].fd == queue_wake_[0])) {
        while (::read(fds[i].fd, buffer, sizeof buffer) > 0) {
        }
      } else if (pipe == nullptr) {
        // Everything decrypted: poll does not see what TLS holds.
        tls::TlsSession::Step got;
        do {
          got = tls_->Read(buffer, sizeof buffer);
          if (got.bytes > 0) inbox.append(buffer, static_cast<std::size_t>(got.bytes));
        } while (got.bytes > 0 && tls_->Buffered());
        if (got.bytes <= 0) {
          connected_ = false;  // its stdin ends with it
          for (const std::unique_ptr<Pipe>& p : pipes_) {
            if (p->kind == io::FrameKind::kStdin) p->ended = true;
          }
        }
        std::vector<io::Frame> frames;
        if (!io::DecodeFrames(inbox, frames).ok()) connected_ = false;
        for (const io::Frame& frame : frames) {
          if (frame.kind == io::FrameKind::kFenceDone && on_fence_done_) {
            on_fence_done_(frame.rank, io::ParseFenceDone(frame.data));
            continue;
          }
          if (frame.kind == io::FrameKind::kWinsize && pty_master_ >= 0) {
            winsize size{};
            if (std::sscanf(frame.data.c_str(), "%hu %hu", &size.ws_row, &size.ws_col) == 2) {
              ::ioctl(pty_master_, TIOCSWINSZ, &size);
            }
          }
          for (const std::unique_ptr<Pipe>& p : pipes_) {
            if (p->kind != io::FrameKind::kStdin || p->rank != frame.rank) continue;
            if (frame.kind == io::FrameKind::kStdin) p->pending += frame.data;
            if (frame.kind == io::FrameKind::kStdinEnd) p->ended = true;
          }
        }
      } else if (pipe->kind == io::FrameKind::kStdin) {
        const ssize_t wrote = ::write(pipe->fd, pipe->pending.data(), pipe->pending.size());
        if (wrote > 0) pipe->pending.erase(0, static_cast<std::size_t>(wrote));
        if (wrote < 0 && errno != EINTR && errno != EAGAIN) pipe->Close();  // it stopped reading
      } else {
        const ssize_t got = ::read(pipe->fd, buffer, sizeof buffer);
        if (got > 0) {
          Send(static_cast<int>(pipe->kind), pipe->rank,
               std::string_view(buffer, static_cast<std::size_t>(got)));
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          pipe->Close();
        }
      }
    }
    // Stdin that ended, once written (or at once when nobody reads it).
    for (const std::unique_ptr<Pipe>& p : pipes_) {
      if (p->kind == io::FrameKind::kStdin && p->ended && p->pending.empty()) p->Close();
    }
  }
  ::signal(SIGCHLD, SIG_DFL);
  if (wake[0] >= 0) {
    child_wake_fd = -1;
    ::close(wake[0]);
    ::close(wake[1]);
  }
  if (before_done) before_done();
  SendQueued();
  Send(static_cast<int>(io::FrameKind::kDone), -1, {});
  if (socket_ >= 0) ::shutdown(socket_, SHUT_WR);
}

}  // namespace cohort::step
