// SPDX-License-Identifier: Apache-2.0
#include "transport/grpc_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace cohort::cli {
namespace {

using Clock = std::chrono::system_clock;

constexpr std::size_t kReadChunk = 256 * 1024;

}  // namespace

CallCanceller::CallCanceller() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

CallCanceller::~CallCanceller() {
  if (fd_ >= 0) ::close(fd_);
}

void CallCanceller::Cancel() {
  cancelled_.store(true);
  if (fd_ < 0) return;  // no eventfd: the call sees the flag before it next waits
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof(one));
}

bool NeverSent(const absl::Status& status) { return status.GetPayload(kUnsentPayload).has_value(); }

std::unique_ptr<GrpcChannel> GrpcChannel::ForTarget(std::string_view target, const Tls& tls) {
  std::unique_ptr<GrpcChannel> channel = ForTargetPlain(target);
  if (channel != nullptr && !channel->endpoints_.empty() &&
      channel->endpoints_.front().address.ss_family == AF_UNIX) {
    return channel;  // the local socket is plain: its peer credentials are its security
  }
  if (channel != nullptr) {
    channel->tls_ = tls;
    std::string host(target.substr(0, target.rfind(':')));
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    channel->tls_host_ = std::move(host);
  }
  return channel;
}

std::unique_ptr<GrpcChannel> GrpcChannel::ForTargetPlain(std::string_view target) {
  sockaddr_storage address{};
  if (target.starts_with("unix:")) {
    std::string_view path = target.substr(5);
    if (path.starts_with("//")) path.remove_prefix(2);  // unix:///abs/path
    auto* unix_address = reinterpret_cast<sockaddr_un*>(&address);
    if (path.empty() || path.size() >= sizeof(unix_address->sun_path)) return nullptr;
    unix_address->sun_family = AF_UNIX;
    std::memcpy(unix_address->sun_path, path.data(), path.size());
    return std::unique_ptr<GrpcChannel>(new GrpcChannel(
        "localhost",
        {{address, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1)}}, "",
        0));
  }
  const std::size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return nullptr;
  std::string host(target.substr(0, colon));
  const std::string_view port_text = target.substr(colon + 1);
  std::uint16_t port = 0;
  if (std::from_chars(port_text.data(), port_text.data() + port_text.size(), port).ptr !=
          port_text.data() + port_text.size() ||
      port == 0) {
    return nullptr;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto* ip6 = reinterpret_cast<sockaddr_in6*>(&address);
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &ip6->sin6_addr) != 1) {
      return nullptr;
    }
    ip6->sin6_family = AF_INET6;
    ip6->sin6_port = htons(port);
    return std::unique_ptr<GrpcChannel>(
        new GrpcChannel(std::string(target), {{address, sizeof(sockaddr_in6)}}, "", 0));
  }
  auto* ip4 = reinterpret_cast<sockaddr_in*>(&address);
  if (::inet_pton(AF_INET, host.c_str(), &ip4->sin_addr) == 1) {
    ip4->sin_family = AF_INET;
    ip4->sin_port = htons(port);
    return std::unique_ptr<GrpcChannel>(
        new GrpcChannel(std::string(target), {{address, sizeof(sockaddr_in)}}, "", 0));
  }
  // A host name: letters, digits, dots, dashes (RFC 1123) and underscores.
  const bool name = !host.empty() && std::ranges::all_of(host, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
  });
  if (!name) return nullptr;
  return std::unique_ptr<GrpcChannel>(new GrpcChannel(std::string(target), {}, host, port));
}

GrpcChannel::GrpcChannel(std::string authority, std::vector<Endpoint> endpoints, std::string host,
                         std::uint16_t port)
    : authority_(std::move(authority)),
      endpoints_(std::move(endpoints)),
      host_(std::move(host)),
      port_(port) {}

GrpcChannel::~GrpcChannel() { Close(); }

std::string GrpcChannel::Describe() const {
  if (!endpoints_.empty() && endpoints_.front().address.ss_family == AF_UNIX) {
    return fmt::format("unix:{}",
                       reinterpret_cast<const sockaddr_un*>(&endpoints_.front().address)->sun_path);
  }
  return authority_;
}

absl::Status GrpcChannel::Wait(short events, Deadline deadline) const {
  for (;;) {
    if (canceller_ != nullptr && canceller_->Cancelled()) {
      return absl::CancelledError("the call was cancelled");
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return absl::DeadlineExceededError("the controller did not answer in time");
    pollfd polled[2] = {
        {.fd = fd_, .events = events, .revents = 0},
        {.fd = canceller_ != nullptr ? canceller_->Fd() : -1, .events = POLLIN, .revents = 0}};
    const int ready = ::poll(polled, 2, static_cast<int>(std::min<std::int64_t>(left, 60'000)));
    if (polled[1].revents != 0) return absl::CancelledError("the call was cancelled");
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(fmt::format("poll: {}", std::strerror(errno)));
    }
  }
}

void GrpcChannel::Close() {
  http2_.reset();
  session_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status GrpcChannel::Connect(const Endpoint& endpoint, Deadline deadline) {
  fd_ = ::socket(endpoint.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return absl::UnavailableError(fmt::format("socket: {}", std::strerror(errno)));
  const auto* address = reinterpret_cast<const sockaddr*>(&endpoint.address);
  const auto failed = [&](int error) {
    return absl::UnavailableError(
        fmt::format("connect to {}: {}", Describe(), std::strerror(error)));
  };
  while (::connect(fd_, address, endpoint.length) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      // A Unix socket whose backlog is full: the controller is behind on
      // accepting. Try again until the deadline.
      if (Clock::now() >= deadline) {
        return absl::DeadlineExceededError("the controller did not accept the connection in time");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (errno != EINPROGRESS) return failed(errno);
    // TCP: the handshake goes on; its outcome is the socket's error.
    const bool limited = connect_limit_.count() > 0 && Clock::now() + connect_limit_ < deadline;
    if (absl::Status ready = Wait(POLLOUT, limited ? Clock::now() + connect_limit_ : deadline);
        !ready.ok()) {
      if (!limited || !absl::IsDeadlineExceeded(ready)) return ready;
      return absl::UnavailableError(
          fmt::format("connect to {}: no answer within {} ms", Describe(), connect_limit_.count()));
    }
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return failed(error);
    break;
  }
  return absl::OkStatus();
}

absl::Status GrpcChannel::Open(Deadline deadline) {
  std::vector<Endpoint> resolved;
  if (endpoints_.empty()) {
    absl::StatusOr<std::vector<Endpoint>> found = ResolveHost(host_, port_, deadline);
    if (!found.ok()) return found.status();
    resolved = *std::move(found);
  }
  // Each address in turn, as gRPC's pick_first does; the first error is
  // the one to tell (the others are usually alike, or less to the point).
  const std::vector<Endpoint>& endpoints = endpoints_.empty() ? resolved : endpoints_;
  absl::Status first_error;
  const Endpoint* reached = nullptr;
  for (const Endpoint& endpoint : endpoints) {
    absl::Status connected = Connect(endpoint, deadline);
    if (connected.ok()) {
      reached = &endpoint;
      break;
    }
    Close();
    if (first_error.ok()) first_error = std::move(connected);
    if (absl::IsDeadlineExceeded(first_error) || absl::IsCancelled(first_error)) break;
  }
  if (reached == nullptr) return first_error;
  if (reached->address.ss_family != AF_UNIX) {
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (tls_.on) {
      if (absl::Status secured = StartTls(deadline); !secured.ok()) {
        Close();
        return secured;
      }
    }
  }
  absl::StatusOr<std::unique_ptr<Http2Session>> session = Http2Session::Client();
  if (!session.ok()) {
    Close();
    return session.status();
  }
  http2_ = *std::move(session);
  if (input_ == nullptr) input_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
  return absl::OkStatus();
}

absl::Status GrpcChannel::StartTls(Deadline deadline) {
  absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
      tls::TlsSession::Start(fd_, tls_.ca_file, tls_host_);
  if (!session.ok()) return session.status();
  session_ = *std::move(session);
  for (;;) {
    const Step step = session_->Handshake();
    if (step.bytes > 0) return absl::OkStatus();
    if (step.wait == 0) {
      return absl::UnavailableError(fmt::format(
          "TLS with {} failed: {}", Describe(),
          step.error.empty() ? std::string("the controller closed the connection; does it serve "
                                           "TLS (TLSCertFile)?")
                             : step.error));
    }
    if (absl::Status ready = Wait(step.wait, deadline); !ready.ok()) return ready;
  }
}

GrpcChannel::Step GrpcChannel::WriteSome(std::string_view bytes) {
  if (session_ != nullptr) return session_->Write(bytes);
  Step step;
  for (;;) {
    step.bytes = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (step.bytes >= 0 || errno != EINTR) break;
  }
  if (step.bytes < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    step.wait = POLLOUT;
  } else if (step.bytes < 0) {
    step.error = std::strerror(errno);
  }
  return step;
}

GrpcChannel::Step GrpcChannel::ReadSome(char* into, std::size_t size) {
  if (session_ != nullptr) return session_->Read(into, size);
  Step step;
  for (;;) {
    step.bytes = ::recv(fd_, into, size, 0);
    if (step.bytes >= 0 || errno != EINTR) break;
  }
  if (step.bytes < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    step.wait = POLLIN;
  } else if (step.bytes < 0) {
    step.error = std::strerror(errno);
  }
  return step;
}

absl::Status GrpcChannel::Send(std::string_view bytes, Deadline deadline) {
  while (!bytes.empty()) {
    const Step step = WriteSome(bytes);
    if (step.bytes > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(step.bytes));
      continue;
    }
    if (step.wait != 0) {
      if (absl::Status ready = Wait(step.wait, deadline); !ready.ok()) return ready;
      continue;
    }
    return absl::UnavailableError(
        fmt::format("lost the connection to {}: {}", Describe(),
                    step.error.empty() ? std::string("closed") : step.error));
  }
  return absl::OkStatus();
}

// Reads what the server sent and feeds it to the session.
absl::Status GrpcChannel::Receive(Deadline deadline) {
  for (;;) {
    Step got = ReadSome(input_.get(), kReadChunk);
    if (got.bytes > 0) {
      return http2_->Feed(std::string_view(input_.get(), static_cast<std::size_t>(got.bytes)));
    }
    if (got.wait != 0) {
      if (absl::Status ready = Wait(got.wait, deadline); !ready.ok()) return ready;
      continue;
    }
    if (got.error.empty() && !http2_->GoingAwayWhy().empty()) {
      return absl::UnavailableError(fmt::format("the controller at {} closed the connection: {}",
                                                Describe(), http2_->GoingAwayWhy()));
    }
    if (got.error.empty()) {
      const bool plain_tcp = !tls_.on && !tls_host_.empty();
      return absl::UnavailableError(fmt::format(
          "the controller at {} closed the connection{}", Describe(),
          plain_tcp ? " (one that serves TLS closes plain connections: name its TLSCertFile and "
                      "TLSCAFile in the cohort.conf this command reads)"
                    : ""));
    }
    return absl::UnavailableError(
        fmt::format("lost the connection to {}: {}", Describe(), got.error));
  }
}

// Writes all the session has to send.
absl::Status GrpcChannel::Flush(Deadline deadline) {
  absl::StatusOr<std::string> output = http2_->Output();
  if (!output.ok()) return output.status();
  return output->empty() ? absl::OkStatus() : Send(*output, deadline);
}

GrpcChannel::Attempt GrpcChannel::Run(GrpcCall& call, const Http2Session::Headers& headers,
                                      Deadline deadline) {
  const auto fail = [&](absl::Status status) {
    call_failure_ = std::move(status);
    return Attempt{Outcome::kDone, true};
  };
  if (fd_ < 0) {
    if (absl::Status opened = Open(deadline); !opened.ok()) {
      // Nothing of the call left this side: another controller may take it.
      if (absl::IsUnavailable(opened)) opened.SetPayload(kUnsentPayload, absl::Cord());
      return fail(opened);
    }
  }
  // The request, behind a new connection's preface and settings: the whole
  // call in one write as a rule.
  absl::StatusOr<std::int32_t> stream = http2_->Request(headers, call);
  if (!stream.ok()) return fail(stream.status());
  while (!call.Finished()) {
    if (canceller_ != nullptr && canceller_->Cancelled()) {
      return fail(absl::CancelledError("the call was cancelled"));
    }
    if (absl::Status sent = Flush(deadline); !sent.ok()) {
      // A server that answers before it has read the whole request (a
      // refusal of one too large) may close while this side still writes:
      // its answer waits in the receive buffer.
      while (!call.Finished() && Receive(deadline).ok()) {
      }
      if (!call.Finished()) return fail(sent);
      break;
    }
    if (call.Finished()) break;
    if (absl::Status ended = http2_->Ended(); !ended.ok()) return fail(ended);
    if (absl::Status read = Receive(deadline); !read.ok()) return fail(read);
  }
  // A call its reader abandoned leaves the server sending on its stream; a
  // connection the server is closing takes no new call.
  // So does a connection whose stream is still open on this side (the
  // server answered before reading the whole request): the session still
  // refers to `call`, which is about to go.
  if (call.Refused() && !http2_->GoingAwayWhy().empty()) {
    // Refused with a reason (the controller's guard: a bound passed): said
    // as it is, not tried again.
    return fail(absl::UnavailableError(fmt::format("the controller at {} refused the call: {}",
                                                   Describe(), http2_->GoingAwayWhy())));
  }
  return Attempt{call.Refused() ? Outcome::kRetry : Outcome::kDone,
                 call.Abandoned() || http2_->GoingAway() || http2_->StreamOpen(*stream)};
}

absl::Status GrpcChannel::Perform(std::string_view method,
                                  const google::protobuf::MessageLite& request,
                                  const Metadata& metadata, Deadline deadline,
                                  const MessageSink& sink, const CallCanceller* canceller) {
  const std::lock_guard lock(mutex_);
  std::string body;
  if (!request.SerializeToString(&body)) {
    return absl::InvalidArgumentError("the request could not be encoded");
  }
  canceller_ = canceller;
  const Http2Session::Headers headers =
      GrpcCall::RequestHeaders(method, tls_.on ? "https" : "http", authority_, deadline, metadata);
  for (int attempt = 0;; ++attempt) {
    GrpcCall call(body, sink);
    call_failure_ = absl::OkStatus();
    const Attempt tried = Run(call, headers, deadline);
    if (tried.drop_connection) Close();
    // A call the server never began is made once more, on a new connection,
    // as gRPC does: only when none of its answer was taken.
    if (tried.outcome == Outcome::kRetry && attempt == 0 && call.Messages() == 0) {
      Close();
      continue;
    }
    canceller_ = nullptr;
    return call_failure_.ok() ? call.Status() : call_failure_;
  }
}

absl::Status GrpcChannel::Call(std::string_view method,
                               const google::protobuf::MessageLite& request,
                               google::protobuf::MessageLite& response, const Metadata& metadata,
                               Deadline deadline) {
  std::size_t messages = 0;
  bool decoded = true;
  const MessageSink take_one = [&](std::string_view message) {
    if (++messages == 1) {
      decoded = response.ParseFromArray(message.data(), static_cast<int>(message.size()));
    }
    return true;
  };
  if (absl::Status status = Perform(method, request, metadata, deadline, take_one, nullptr);
      !status.ok()) {
    return status;
  }
  if (messages != 1) {
    return absl::InternalError(fmt::format(
        "the controller broke the gRPC protocol: a unary answer of {} messages", messages));
  }
  if (!decoded) return absl::InternalError("the controller's response could not be decoded");
  return absl::OkStatus();
}

absl::Status GrpcChannel::ServerStream(std::string_view method,
                                       const google::protobuf::MessageLite& request,
                                       const Metadata& metadata, const MessageSink& sink,
                                       const CallCanceller& canceller) {
  // A cancelled stream leaves the server sending on its connection: Run
  // (or HandleData, when `sink` ends it) has the connection dropped.
  return Perform(method, request, metadata, Deadline::max(), sink, &canceller);
}

}  // namespace cohort::cli
