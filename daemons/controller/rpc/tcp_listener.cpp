// SPDX-License-Identifier: Apache-2.0
#include "rpc/tcp_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cohort::controller {

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::ListenOn(const std::string& host,
                                                                   int port, int family) {
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  const bool any = name.empty() || name == "0.0.0.0" || name == "::";
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error =
          ::getaddrinfo(any ? nullptr : name.c_str(), service.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", host, port, ::gai_strerror(error)));
  }
  std::string why = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int on = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (a->ai_family == AF_INET6 && any) {
      // Every address means IPv4 too.
      const int off = 0;
      (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 4096) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::freeaddrinfo(found);
    const int bound_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return std::unique_ptr<TcpListener>(new TcpListener(fd, bound_port));
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", host, port, why));
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Listen(const std::string& host,
                                                                 int port) {
  const bool any = host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
  if (!any) return ListenOn(host, port, AF_UNSPEC);
  // Every address: IPv6's, which takes IPv4's too, as gRPC's own listener
  // did; IPv4's alone on a host without IPv6.
  absl::StatusOr<std::unique_ptr<TcpListener>> both = ListenOn(host, port, AF_INET6);
  return both.ok() ? std::move(both) : ListenOn(host, port, AF_INET);
}

TcpListener::~TcpListener() { Stop(); }

void TcpListener::Serve(H2Guard& guard) {
  accepting_ = std::make_unique<AcceptLoop>(fd_, [&guard](int fd) {
    const int on = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    std::array<char, INET6_ADDRSTRLEN> host{};
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 ||
        ::getnameinfo(reinterpret_cast<const sockaddr*>(&peer), length, host.data(), host.size(),
                      nullptr, 0, NI_NUMERICHOST) != 0) {
      ::close(fd);  // gone already
      return;
    }
    std::string address = host.data();
    // An IPv4 client of a dual-stack port, as its own address.
    if (address.starts_with("::ffff:") && address.find('.') != std::string::npos) {
      address.erase(0, 7);
    }
    guard.Add(fd, Peer{.kind = Peer::Kind::kTcp,
                       .uid = 0,
                       .host = std::move(address),
                       .certificate_names = {}});
  });
  accepting_->Start();
}

void TcpListener::Stop() {
  if (fd_ < 0) return;
  if (accepting_) accepting_->Stop();
  ::close(fd_);
  fd_ = -1;
}

}  // namespace cohort::controller
