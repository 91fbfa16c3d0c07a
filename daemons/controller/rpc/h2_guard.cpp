// SPDX-License-Identifier: Apache-2.0
#include "rpc/h2_guard.h"

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <grpcpp/server_posix.h>

#include "controller_log.h"

namespace cohort::controller {
namespace {

constexpr std::size_t kMaxConnections = 4096;
constexpr int kMaxPerHost = 64;
/// Bytes one side may be ahead of the other: with the connection caps,
/// what the guard itself holds stays under 2 GiB (4,096 x 2 x 256 KiB).
constexpr std::size_t kBehind = 256 * 1024;
constexpr std::chrono::seconds kHandshakeTimeout{10};
constexpr std::chrono::seconds kPenalty{10};

std::string SourceOf(const Peer& peer) {
  return peer.kind == Peer::Kind::kLocal ? "uid " + std::to_string(peer.uid) : peer.host;
}

std::chrono::milliseconds SteadyNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace

struct H2Guard::Connection {
  int client = -1;
  int inner = -1;  ///< this end of the socket pair; gRPC holds the other
  Peer peer;
  std::string source;                    ///< SourceOf(peer)
  std::unique_ptr<tls::TlsSession> tls;  ///< null: plain TCP
  bool ready = false;                    ///< the handshake is done (or there is none)
  std::chrono::milliseconds handshake_deadline{0};
  std::string up;         ///< from the client, for gRPC
  std::string down;       ///< from gRPC, for the client
  short client_wait = 0;  ///< what TLS waits for on the client's socket
  std::uint32_t client_events = 0;
  std::uint32_t inner_events = 0;
  std::chrono::milliseconds opened{0};
  /// Told why it is refused (GOAWAY in `down`): what it sends is dropped,
  /// and it is closed once it closes, or at `handshake_deadline`.
  bool refusing = false;
  FrameWatch watch;

  /// Holds nothing a client waits for: its handshake is not done, or it
  /// has no stream open and nothing in flight. The first to go at a cap.
  [[nodiscard]] bool Idle() const {
    return !ready || (watch.OpenStreams() == 0 && up.empty() && down.empty());
  }
};

H2Guard::H2Guard(grpc::Server* server, PeerBook& peers, std::shared_ptr<tls::TlsServerContext> tls)
    : server_(server), peers_(peers), tls_(std::move(tls)) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
  thread_ = std::thread([this] { Run(); });
}

H2Guard::~H2Guard() { Stop(); }

void H2Guard::Add(int fd, Peer peer) {
  {
    const std::lock_guard lock(mutex_);
    incoming_.emplace_back(fd, std::move(peer));
  }
  const std::uint64_t one = 1;
  (void)::write(wake_, &one, sizeof(one));
}

void H2Guard::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const std::uint64_t one = 1;
  (void)::write(wake_, &one, sizeof(one));
  thread_.join();
  while (!connections_.empty()) Close(connections_.begin()->first, "");
  for (const auto& [fd, peer] : incoming_) ::close(fd);
  incoming_.clear();
  ::close(wake_);
  ::close(epoll_);
}

void H2Guard::Run() {
  // Named so that top -H and /proc/PID/task show what the guard costs.
  ::pthread_setname_np(::pthread_self(), "rpc-guard");
  // Its sockets are sent to with MSG_NOSIGNAL, and OpenSSL's writes would
  // raise SIGPIPE: blocked here once rather than around every TLS call.
  tls::TlsSession::BlockSigpipeInThisThread();
  std::array<epoll_event, 64> events{};
  std::chrono::milliseconds swept = SteadyNow();
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 1000);
    for (int i = 0; i < n && !stopping_; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_) {
        std::uint64_t count = 0;
        (void)::read(wake_, &count, sizeof(count));
        std::vector<std::pair<int, Peer>> adopted;
        {
          const std::lock_guard lock(mutex_);
          adopted.swap(incoming_);
        }
        for (auto& [client, peer] : adopted) Adopt(client, std::move(peer));
        continue;
      }
      const auto inner = inner_to_client_.find(fd);
      const bool from_inner = inner != inner_to_client_.end();
      const auto it = connections_.find(from_inner ? inner->second : fd);
      if (it != connections_.end()) Pump(*it->second, from_inner ? Woke::kInner : Woke::kClient);
    }
    // Handshakes past their time, once a second.
    if (const std::chrono::milliseconds now = SteadyNow(); now - swept >= std::chrono::seconds(1)) {
      swept = now;
      std::vector<int> late;
      for (const auto& [fd, c] : connections_) {
        if ((!c->ready || c->refusing) && now > c->handshake_deadline) late.push_back(fd);
      }
      for (const int fd : late) Close(fd, "its TLS handshake took over 10 s");
      std::erase_if(penalized_, [&](const auto& entry) { return entry.second <= now; });
      // What gRPC freed of a refused client's connection stays with
      // malloc, spread over its arenas, unless it is asked to give it back.
      if (trim_due_ && now - trimmed_ >= std::chrono::seconds(1)) {
        ::malloc_trim(0);
        trimmed_ = now;
        trim_due_ = false;
      }
    }
  }
}

void H2Guard::Adopt(int fd, Peer peer) {
  std::string source = SourceOf(peer);
  const auto penalty = penalized_.find(source);
  const bool penalized = penalty != penalized_.end() && penalty->second > SteadyNow();
  // At a cap, the oldest idle connection (of the same source, at its cap)
  // makes room: held-open connections never keep an active client out.
  if (!penalized &&
      (connections_.size() >= kMaxConnections || per_source_[source] >= kMaxPerHost)) {
    const bool source_full = per_source_[source] >= kMaxPerHost;
    int oldest = -1;
    std::chrono::milliseconds oldest_opened = std::chrono::milliseconds::max();
    for (const auto& [fd_open, open] : connections_) {
      if (open->Idle() && (!source_full || open->source == source) &&
          open->opened < oldest_opened) {
        oldest = fd_open;
        oldest_opened = open->opened;
      }
    }
    if (oldest >= 0) Close(oldest, "idle, to make room at a cap");
  }
  int& from_source = per_source_[source];
  if (penalized && peer.kind == Peer::Kind::kLocal && from_source < kMaxPerHost &&
      connections_.size() < kMaxConnections) {
    // A local client (no TLS to end first) is told why, as HTTP/2 says it.
    ++from_source;
    auto c = std::make_unique<Connection>();
    c->client = fd;
    c->opened = SteadyNow();
    c->source = std::move(source);
    c->peer = std::move(peer);
    c->ready = true;
    Connection& told = *c;
    connections_.emplace(fd, std::move(c));
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
    told.client_events = EPOLLIN;
    ++refused_;
    Tell(told, "it passed a bound of the controller's a moment ago");
    return;
  }
  if (connections_.size() >= kMaxConnections || from_source >= kMaxPerHost || penalized) {
    if (from_source == 0) per_source_.erase(source);
    ::close(fd);
    if (++refused_ % 1000 == 1) {
      Log("rpc")->warn(
          "rpc_connection_refused source={:?} open={} penalized={} refused={} (at most {} "
          "connections, {} from one source)",
          source, connections_.size(), penalized, refused_.load(), kMaxConnections, kMaxPerHost);
    }
    return;
  }
  ++from_source;
  auto c = std::make_unique<Connection>();
  c->client = fd;
  c->opened = SteadyNow();
  c->source = std::move(source);
  const bool tcp = peer.kind == Peer::Kind::kTcp;
  c->peer = std::move(peer);
  if (tcp && tls_ != nullptr) {
    c->tls = tls::TlsSession::StartServer(fd, *tls_);
    c->handshake_deadline = SteadyNow() + kHandshakeTimeout;
  } else {
    c->ready = true;
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  c->client_events = EPOLLIN;
  Connection& added = *c;
  connections_.emplace(fd, std::move(c));
  Pump(added, Woke::kBoth);
}

void H2Guard::Pump(Connection& c, Woke woke) {
  const int client = c.client;
  // TLS that waited on the client's socket for something other than
  // application bytes reads it whatever woke.
  const bool read_client = woke != Woke::kInner || c.client_wait != 0;
  const bool read_inner = woke != Woke::kClient;
  c.client_wait = 0;
  if (c.refusing) return Linger(c);
  if (!c.ready) {
    const tls::TlsSession::Step step = c.tls->Handshake();
    if (!step.error.empty() || (step.bytes <= 0 && step.wait == 0)) {
      Close(client, "");  // not TLS, or a client that gave up: nothing to say
      return;
    }
    if (step.bytes <= 0) {
      c.client_wait = step.wait;
      Watch(c);
      return;
    }
    c.ready = true;
  }
  if (c.inner < 0) {
    // The handshake is done: gRPC gets the plain side of a socket pair.
    std::array<int, 2> pair{};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair.data()) != 0) {
      Close(client, "no socket pair");
      return;
    }
    c.inner = pair[0];
    if (c.tls) c.peer.certificate_names = c.tls->VerifiedPeerNames();
    peers_.Put(pair[1], c.peer);
    inner_to_client_[c.inner] = client;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = c.inner;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.inner, &event);
    c.inner_events = EPOLLIN;
    grpc::AddInsecureChannelFromFd(server_, pair[1]);
  }
  static thread_local std::array<char, 64 * 1024> buffer;
  // The client's bytes, as far as gRPC keeps up.
  // Each side is read until a read comes back short (level-triggered
  // epoll says when there is more), not until EAGAIN: one system call per
  // message rather than two.
  bool more = read_client;
  while (more && c.up.size() < kBehind) {
    ssize_t n = 0;
    if (c.tls) {
      const tls::TlsSession::Step step = c.tls->Read(buffer.data(), buffer.size());
      if (!step.error.empty()) return Close(client, "");
      if (step.bytes <= 0 && step.wait == 0) return Close(client, "");  // the client closed
      if (step.bytes <= 0) {
        c.client_wait |= step.wait;
        break;
      }
      n = step.bytes;
    } else {
      n = ::read(client, buffer.data(), buffer.size());
      if (n == 0) return Close(client, "");
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        return Close(client, "");
      }
    }
    more = static_cast<std::size_t>(n) == buffer.size() || (c.tls && c.tls->Buffered());
    const std::string_view bytes(buffer.data(), static_cast<std::size_t>(n));
    if (std::string why = c.watch.FromClient(bytes, SteadyNow()); !why.empty()) {
      ++refused_;
      return Refuse(c, why);
    }
    c.up.append(bytes);
  }
  while (!c.up.empty()) {
    const ssize_t n = ::send(c.inner, c.up.data(), c.up.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.up.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    return Close(client, "");
  }
  // gRPC's bytes, as far as the client keeps up.
  bool server_closed = false;
  more = read_inner && c.inner >= 0;
  while (more && c.down.size() < kBehind) {
    const ssize_t n = ::read(c.inner, buffer.data(), buffer.size());
    if (n > 0) {
      const std::string_view bytes(buffer.data(), static_cast<std::size_t>(n));
      c.watch.FromServer(bytes);
      c.down.append(bytes);
      more = static_cast<std::size_t>(n) == buffer.size();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    server_closed = true;  // gRPC closed the connection (its GOAWAY is in `down`)
    break;
  }
  if (!FlushDown(c) || server_closed) return Close(client, "");
  Watch(c);
}

void H2Guard::Refuse(Connection& c, const std::string& why) {
  Log("rpc")->warn("rpc_client_refused source={:?} reason={:?}; it may not connect for {} s",
                   c.source, why, kPenalty.count());
  penalized_[c.source] = SteadyNow() + kPenalty;
  trim_due_ = true;
  Tell(c, why);
}

void H2Guard::Tell(Connection& c, const std::string& why) {
  // gRPC's side goes at once, and with it what it holds for this client.
  if (c.inner >= 0) {
    inner_to_client_.erase(c.inner);
    ::close(c.inner);
    c.inner = -1;
  }
  c.up.clear();
  c.refusing = true;
  c.handshake_deadline = SteadyNow() + std::chrono::seconds(2);
  // The client is told why as HTTP/2 says it (GOAWAY, ENHANCE_YOUR_CALM,
  // the reason as its debug data) where a frame of the guard's may go:
  // after the server's whole frames, SETTINGS first when it said nothing.
  if (c.watch.ServerAtFrameEnd()) {
    const std::string text = fmt::format(
        "{}; this client may not connect for {} s (docs/operations.md, \"Resource bounds\")", why,
        kPenalty.count());
    const auto header = [&c](std::size_t length, char type) {
      c.down += static_cast<char>((length >> 16) & 0xff);
      c.down += static_cast<char>((length >> 8) & 0xff);
      c.down += static_cast<char>(length & 0xff);
      c.down += type;
      c.down.append(5, '\0');  // flags, stream 0
    };
    if (!c.watch.ServerSpoke()) header(0, 0x4);           // SETTINGS, empty
    header(8 + text.size(), 0x7);                         // GOAWAY
    c.down.append(std::string("\0\0\0\0\0\0\0\x0b", 8));  // last stream 0, ENHANCE_YOUR_CALM
    c.down += text;
  } else {
    c.down.clear();
  }
  Linger(c);
}

void H2Guard::Linger(Connection& c) {
  const int client = c.client;
  if (!FlushDown(c)) return Close(client, "");
  if (c.down.empty()) ::shutdown(client, SHUT_WR);
  // What it still sends is read and dropped until it closes: closing with
  // its bytes unread would reset the connection before it read why.
  static thread_local std::array<char, 16 * 1024> dropped;
  for (;;) {
    const ssize_t n = ::read(client, dropped.data(), dropped.size());
    if (n == 0) return Close(client, "");
    if (n < 0) break;
  }
  Watch(c);
}

bool H2Guard::FlushDown(Connection& c) {
  while (!c.down.empty()) {
    ssize_t n = 0;
    if (c.tls) {
      const tls::TlsSession::Step step = c.tls->Write(c.down);
      if (!step.error.empty() || (step.bytes <= 0 && step.wait == 0)) return false;
      if (step.bytes <= 0) {
        c.client_wait |= step.wait;
        return true;
      }
      n = step.bytes;
    } else {
      n = ::send(c.client, c.down.data(), c.down.size(), MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (n <= 0) return false;
    }
    c.down.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

void H2Guard::Watch(Connection& c) {
  std::uint32_t client = 0;
  if (!c.ready || c.up.size() < kBehind || (c.client_wait & POLLIN) != 0) client |= EPOLLIN;
  if (!c.down.empty() || (c.client_wait & POLLOUT) != 0) client |= EPOLLOUT;
  if (client != c.client_events) {
    epoll_event event{};
    event.events = client;
    event.data.fd = c.client;
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.client, &event);
    c.client_events = client;
  }
  if (c.inner < 0) return;
  std::uint32_t inner = 0;
  if (c.down.size() < kBehind) inner |= EPOLLIN;
  if (!c.up.empty()) inner |= EPOLLOUT;
  if (inner != c.inner_events) {
    epoll_event event{};
    event.events = inner;
    event.data.fd = c.inner;
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.inner, &event);
    c.inner_events = inner;
  }
}

void H2Guard::Close(int client_fd, const std::string& why) {
  const auto it = connections_.find(client_fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if (!why.empty())
    Log("rpc")->debug("rpc_connection_closed source={:?} reason={:?}", c.source, why);
  if (c.inner >= 0) {
    inner_to_client_.erase(c.inner);
    ::close(c.inner);
  }
  c.tls.reset();
  // What the client sent and nobody read would make the close a reset:
  // read it, so that a client sees the connection closed, not broken.
  static thread_local std::array<char, 16 * 1024> unread;
  for (int i = 0; i < 16 && ::read(c.client, unread.data(), unread.size()) > 0; ++i) {
  }
  ::close(c.client);
  if (const auto source = per_source_.find(c.source);
      source != per_source_.end() && --source->second <= 0) {
    per_source_.erase(source);
  }
  connections_.erase(it);
}

}  // namespace cohort::controller
