// SPDX-License-Identifier: Apache-2.0
#include "transport/step_io_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/launch/io_frame.h"
#include "cohort/launch/mpi_type.h"
#include "tls_session.h"

namespace cohort::cli {
namespace {

constexpr std::size_t kReadSize = 64 * 1024;
// A line longer than this is printed in pieces rather than held.
constexpr std::size_t kLongestLine = 64 * 1024;
// Fences under way at once: PMIx runs them one after another; more is a
// stepd gone wrong.
constexpr std::size_t kMaxOpenFences = 64;
// Connections that have not said Hello: how many are kept at once, and for
// how long (a stepd says it in its first flight, at once).
constexpr std::size_t kMaxStrangers = 256;
constexpr std::chrono::seconds kHelloWait{10};

absl::Status Errno(std::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(errno),
                      fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

std::string RandomToken() {
  unsigned char bytes[16] = {};
  ssize_t got = -1;
  do {
    got = ::getrandom(bytes, sizeof bytes, 0);
  } while (got < 0 && errno == EINTR);
  // A key that is not random would let anyone read the step's stream.
  COHORT_CHECK(got == static_cast<ssize_t>(sizeof bytes), "getrandom gave no random bytes");
  std::string key;
  for (const unsigned char b : bytes) key += fmt::format("{:02x}", b);
  return key;
}

namespace {

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t wrote = ::write(fd, data.data(), data.size());
    if (wrote < 0 && errno == EINTR) continue;
    // Whoever reads `cohort run`'s output has gone (`| head`): end as a
    // command does, by SIGPIPE, which this thread blocks (Serve) and the
    // process does not.
    if (wrote < 0 && errno == EPIPE) ::kill(::getpid(), SIGPIPE);
    if (wrote <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

}  // namespace

struct StepIoServer::Connection {
  int fd = -1;
  /// The stream's TLS, keyed by the step's key; non-blocking.
  std::unique_ptr<tls::TlsSession> tls{};
  bool secured = false;  ///< the handshake is done
  short wait = 0;        ///< what the last TLS step waits for besides reading
  std::string inbox{};
  bool hello = false;
  std::string node{};  ///< as its Hello names it
  int first_rank = 0;
  int ranks = 0;
  std::string outbox{};                           ///< stdin frames not yet sent
  std::chrono::steady_clock::time_point since{};  ///< accepted at
};

std::string StepIoHost(const std::string& target) {
  if (const char* given = std::getenv("COHORT_IO_ADDRESS"); given != nullptr && *given != '\0') {
    return given;
  }
  const std::size_t colon = target.rfind(':');
  if (target.starts_with("unix:") || colon == std::string::npos) return "127.0.0.1";
  // The address the kernel would send from to reach the controller: no
  // packet leaves for a UDP connect.
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string host = "127.0.0.1";
  if (::getaddrinfo(target.substr(0, colon).c_str(), target.substr(colon + 1).c_str(), &hints,
                    &found) == 0) {
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      sockaddr_storage local{};
      socklen_t size = sizeof local;
      char text[INET6_ADDRSTRLEN] = {};
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0 &&
          ::getnameinfo(reinterpret_cast<sockaddr*>(&local), size, text, sizeof text, nullptr, 0,
                        NI_NUMERICHOST) == 0) {
        host = text;
        ::close(fd);
        break;
      }
      ::close(fd);
    }
    ::freeaddrinfo(found);
  }
  return host;
}

absl::StatusOr<std::unique_ptr<StepIoServer>> StepIoServer::Listen(const std::string& host,
                                                                   RankLabels labels,
                                                                   int stdin_rank,
                                                                   StepTerminal terminal,
                                                                   StepOutput output) {
  std::unique_ptr<StepIoServer> server(new StepIoServer());
  server->labels_ = labels;
  server->pty_ = terminal == StepTerminal::kPty;
  server->stdin_rank_ = stdin_rank;
  server->files_ = output == StepOutput::kFiles;
  server->key_ = RandomToken();
  if (const char* timeout = std::getenv("SLURM_PMIX_TIMEOUT"); timeout != nullptr && *timeout) {
    absl::StatusOr<std::chrono::seconds> seconds = launch::ParseFenceTimeout(timeout);
    if (!seconds.ok()) return seconds.status();
    server->fence_timeout_ = *seconds;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), "0", &hints, &found); error != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "COHORT_IO_ADDRESS: {:?} is no address of this host ({}); give a numeric address the "
        "nodes reach",
        host, ::gai_strerror(error)));
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    const absl::Status status =
        Errno(fmt::format("cannot listen on {} for the step's output", host));
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    return status;
  }
  ::freeaddrinfo(found);
  server->listener_ = fd;
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size);
  char port[16] = {};
  ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), size, nullptr, 0, port, sizeof port,
                NI_NUMERICSERV);
  server->address_ = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                         : fmt::format("{}:{}", host, port);
  if (::pipe2(server->wake_, O_CLOEXEC | O_NONBLOCK) != 0) return Errno("cannot make a pipe");
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

StepIoServer::~StepIoServer() {
  stop_ = true;
  if (wake_[1] >= 0) (void)::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (const int fd : {listener_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

v1::StepIo StepIoServer::Io() const {
  v1::StepIo io;
  io.set_address(address_);
  io.set_key(key_);
  io.set_stdin_rank(stdin_rank_);
  io.set_pty(pty_);
  io.set_files(files_);
  return io;
}

void StepIoServer::Finish(int nodes, std::chrono::milliseconds limit) {
  {
    std::unique_lock lock(mutex_);
    std::uint64_t seen = output_frames_;
    while (done_ < nodes && changed_.wait_for(lock, limit, [&] {
      return done_ >= nodes || output_frames_ != seen;
    })) {
      seen = output_frames_;
    }
  }
  stop_ = true;
  (void)::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  FlushPartials();
}

void StepIoServer::Print(int rank, bool error, std::string_view data) {
  if (pty_) {  // a terminal's output: prompts end without a newline
    WriteAll(error ? STDERR_FILENO : STDOUT_FILENO, data);
    return;
  }
  std::string& partial = partial_[{rank, error}];
  partial.append(data);
  std::size_t end = partial.rfind('\n');
  if (end == std::string::npos && partial.size() < kLongestLine) return;
  end = end == std::string::npos ? partial.size() : end + 1;
  std::string out;
  if (labels_ == RankLabels::kNone) {
    out = partial.substr(0, end);
  } else {
    for (std::size_t start = 0; start < end;) {
      std::size_t stop = partial.find('\n', start);
      stop = stop == std::string::npos || stop >= end ? end : stop + 1;
      out += fmt::format("{}: {}", rank, std::string_view(partial).substr(start, stop - start));
      start = stop;
    }
  }
  partial.erase(0, end);
  WriteAll(error ? STDERR_FILENO : STDOUT_FILENO, out);
}

void StepIoServer::FlushPartials() {
  for (auto& [key, partial] : partial_) {
    if (partial.empty()) continue;
    const std::string text = partial + "\n";
    partial.clear();
    Print(key.first, key.second, text);
  }
}

void StepIoServer::Serve() {
  // A stepd that has gone must not end `cohort run`: TLS writes to its
  // socket with write(2), whose SIGPIPE goes to the writing thread.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
  std::vector<std::unique_ptr<Connection>> connections;
  // The PMIx fences under way (--mpi=pmix), by number: every node's part,
  // sent back to every node once all have come.
  struct Fence {
    int nodes = 0;
    std::map<int, std::string> parts;  // by node index
    std::set<std::string> arrived;     // the nodes whose parts came
    std::chrono::steady_clock::time_point began;
  };
  std::map<int, Fence> fences;
  // Ends fence `number` for every stepd: with every part, or why not.
  auto end_fence = [&](int number, const absl::StatusOr<std::string>& all) {
    const std::string done = io::EncodeFrame(
        {.kind = io::FrameKind::kFenceDone, .rank = number, .data = io::EncodeFenceDone(all)});
    for (const auto& c : connections) {
      if (c->hello) c->outbox += done;
    }
    fences.erase(number);
  };
  // Takes a stepd's part of a fence; false for one that no stepd of this
  // step would send (the connection is then closed).
  auto take_part = [&](const Connection& from, const io::Frame& frame) {
    absl::StatusOr<io::FencePart> part = io::ParseFencePart(frame.data);
    if (!part.ok() || frame.rank < 0 || fences.size() > kMaxOpenFences) return false;
    Fence& fence = fences[frame.rank];
    if (fence.nodes == 0) {
      fence.nodes = part->nodes;
      fence.began = std::chrono::steady_clock::now();
    }
    if (fence.nodes != part->nodes || fence.parts.contains(part->node_index)) return false;
    fence.parts.emplace(part->node_index, std::move(part->data));
    fence.arrived.insert(from.node);
    if (static_cast<int>(fence.parts.size()) < fence.nodes) return true;
    std::size_t total = 1;
    for (const auto& [index, data] : fence.parts) total += data.size();
    absl::StatusOr<std::string> all = std::string();
    if (total > io::kMaxFenceData) {
      all = absl::ResourceExhaustedError(fmt::format(
          "the fence's data from {} nodes is {} bytes, more than the {} one fence carries",
          fence.nodes, total, io::kMaxFenceData));
    } else {
      all->reserve(total);
      for (const auto& [index, data] : fence.parts) *all += data;
    }
    end_fence(frame.rank, all);
    return true;
  };
  // A fence some node never joined fails, naming what is missing, once it
  // has waited fence_timeout_: its ranks then fail their MPI_Init (or
  // whatever fenced) rather than wait for good.
  auto expire_fences = [&] {
    const auto now = std::chrono::steady_clock::now();
    std::vector<int> expired;
    for (const auto& [number, fence] : fences) {
      if (now - fence.began >= fence_timeout_) expired.push_back(number);
    }
    for (const int number : expired) {
      const Fence& fence = fences[number];
      std::vector<std::string> missing;
      int connected = 0;
      for (const auto& c : connections) {
        if (!c->hello) continue;
        ++connected;
        if (!fence.arrived.contains(c->node)) {
          missing.push_back(c->ranks == 1 ? fmt::format("{} (rank {})", c->node, c->first_rank)
                                          : fmt::format("{} (ranks {}-{})", c->node, c->first_rank,
                                                        c->first_rank + c->ranks - 1));
        }
      }
      if (fence.nodes > connected) {
        missing.push_back(fmt::format("{} node{} that never connected", fence.nodes - connected,
                                      fence.nodes - connected == 1 ? "" : "s"));
      }
      end_fence(number, absl::DeadlineExceededError(fmt::format(
                            "the step's nodes did not all report for its MPI wire-up within {} s "
                            "(SLURM_PMIX_TIMEOUT): {} never arrived",
                            fence_timeout_.count(), fmt::join(missing, ", "))));
    }
  };
  std::string stdin_pending;
  bool stdin_open = stdin_rank_ >= 0;
  bool stdin_end_sent = false;
  bool size_sent = !pty_;
  char buffer[kReadSize];
  // The connection of the node that runs the stdin rank, once it said hello.
  auto stdin_target = [&]() -> Connection* {
    for (const auto& c : connections) {
      if (c->hello && stdin_rank_ >= c->first_rank && stdin_rank_ < c->first_rank + c->ranks) {
        return c.get();
      }
    }
    return nullptr;
  };
  while (!stop_) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    if (stdin_open && stdin_pending.size() < kReadSize) fds.push_back({STDIN_FILENO, POLLIN, 0});
    const std::size_t first_connection = fds.size();
    for (const auto& c : connections) {
      const bool write = (c->secured && !c->outbox.empty()) || c->wait == POLLOUT;
      fds.push_back({c->fd, static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0});
    }
    if (::poll(fds.data(), fds.size(), 500) < 0 && errno != EINTR) return;
    if ((fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
          fd < 0 ? absl::UnavailableError("no connection")
                 : tls::TlsSession::StartPsk(fd, tls::TlsSide::kServer, key_);
      if (session.ok()) {
        // Anyone may dial: those that have not said Hello are bounded, the
        // oldest making room, so that strangers cannot keep a stepd out.
        std::vector<Connection*> strangers;
        for (const auto& c : connections) {
          if (!c->hello && c->fd >= 0) strangers.push_back(c.get());
        }
        if (strangers.size() >= kMaxStrangers) {
          Connection* oldest = *std::min_element(
              strangers.begin(), strangers.end(),
              [](const Connection* a, const Connection* b) { return a->since < b->since; });
          ::close(oldest->fd);
          oldest->fd = -1;
        }
        connections.push_back(std::make_unique<Connection>(Connection{
            .fd = fd, .tls = *std::move(session), .since = std::chrono::steady_clock::now()}));
      } else if (fd >= 0) {
        ::close(fd);
      }
    }
    if (fds.size() > 2 && fds[2].fd == STDIN_FILENO && fds[2].revents != 0) {
      const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (got > 0) {
        stdin_pending.append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        stdin_open = false;
      }
    }
    if (Connection* target = stdin_target(); target != nullptr) {
      if (!size_sent) {
        winsize size{};
        if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &size) == 0) {
          target->outbox +=
              io::EncodeFrame({.kind = io::FrameKind::kWinsize,
                               .rank = stdin_rank_,
                               .data = fmt::format("{} {}", size.ws_row, size.ws_col)});
        }
        size_sent = true;
      }
      if (!stdin_pending.empty()) {
        target->outbox += io::EncodeFrame(
            {.kind = io::FrameKind::kStdin, .rank = stdin_rank_, .data = stdin_pending});
        stdin_pending.clear();
      }
      if (!stdin_open && !stdin_end_sent && stdin_rank_ >= 0) {
        target->outbox +=
            io::EncodeFrame({.kind = io::FrameKind::kStdinEnd, .rank = stdin_rank_, .data = ""});
        stdin_end_sent = true;
      }
    }
    for (std::size_t i = first_connection; i < fds.size(); ++i) {
      Connection& c = *connections[i - first_connection];
      if (fds[i].revents == 0) continue;
      bool close = false;
      c.wait = 0;
      if (!c.secured) {
        // A peer without the step's key fails here, before a byte of it
        // is read as a frame.
        const tls::TlsSession::Step step = c.tls->Handshake();
        c.secured = step.bytes > 0;
        c.wait = step.wait;
        close = !c.secured && step.wait == 0;
      }
      if (c.secured && !c.outbox.empty()) {
        const tls::TlsSession::Step sent = c.tls->Write(c.outbox);
        if (sent.bytes > 0) c.outbox.erase(0, static_cast<std::size_t>(sent.bytes));
        c.wait = sent.wait;
        close = sent.bytes <= 0 && sent.wait == 0;
      }
      bool got = false;
      while (c.secured && !close) {
        // Everything decrypted: poll does not see what TLS holds.
        const tls::TlsSession::Step read = c.tls->Read(buffer, sizeof buffer);
        if (read.bytes <= 0) {
          close = read.wait == 0;
          if (read.wait == POLLOUT) c.wait = POLLOUT;
          break;
        }
        c.inbox.append(buffer, static_cast<std::size_t>(read.bytes));
        got = true;
      }
      if (got) {
        std::vector<io::Frame> frames;
        // Decoded even when the peer has gone: its last frames (Done) came
        // with the end.
        if (!io::DecodeFrames(c.inbox, frames).ok()) close = true;
        for (const io::Frame& frame : frames) {
          if (!c.hello) {
            absl::StatusOr<io::Hello> hello = frame.kind == io::FrameKind::kHello
                                                  ? io::ParseHello(frame.data)
                                                  : absl::InvalidArgumentError("no hello");
            // Anyone may dial: only a stepd the controller told the key is heard.
            if (!hello.ok() || !io::SameKey(hello->key, key_)) {
              close = true;
              break;
            }
            c.hello = true;
            c.node = hello->node;
            c.first_rank = hello->first_rank;
            c.ranks = hello->ranks;
            continue;
          }
          if (frame.kind == io::FrameKind::kStdout || frame.kind == io::FrameKind::kStderr) {
            Print(frame.rank, frame.kind == io::FrameKind::kStderr, frame.data);
            const std::lock_guard lock(mutex_);
            ++output_frames_;
            changed_.notify_all();
          } else if (frame.kind == io::FrameKind::kFencePart) {
            if (!take_part(c, frame)) {
              close = true;
              break;
            }
          } else if (frame.kind == io::FrameKind::kDone) {
            const std::lock_guard lock(mutex_);
            ++done_;
            changed_.notify_all();
          }
        }
      }
      if (close) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (const auto& c : connections) {
      if (!c->hello && c->fd >= 0 && now - c->since > kHelloWait) {
        ::close(c->fd);
        c->fd = -1;
      }
    }
    std::erase_if(connections, [](const auto& c) { return c->fd < 0; });
    expire_fences();
    if ((fds[0].revents & POLLIN) != 0) {
      while (::read(wake_[0], buffer, sizeof buffer) > 0) {
      }
    }
  }
  for (const auto& c : connections) ::close(c->fd);
}

}  // namespace cohort::cli
