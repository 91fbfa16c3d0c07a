// SPDX-License-Identifier: Apache-2.0
#include "psk_link.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cohort::step {

using Clock = std::chrono::steady_clock;

namespace {

// HOST:PORT's addresses (a name or an IP address, IPv6 in brackets).
absl::StatusOr<addrinfo*> Resolve(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::UnavailableError("not HOST:PORT");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return absl::UnavailableError(::gai_strerror(error));
  }
  return found;
}

}  // namespace

absl::StatusOr<int> BeginTcp(const std::string& address) {
  absl::StatusOr<addrinfo*> found = Resolve(address);
  if (!found.ok()) return found.status();
  addrinfo* a = *found;
  const int fd =
      ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  const int error = fd < 0 ? errno : (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno);
  ::freeaddrinfo(a);
  if (error != 0 && error != EINPROGRESS) {
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(std::strerror(error));
  }
  return fd;
}

absl::StatusOr<int> DialTcp(const std::string& address, std::chrono::milliseconds wait) {
  absl::StatusOr<addrinfo*> resolved = Resolve(address);
  if (!resolved.ok()) return resolved.status();
  addrinfo* found = *resolved;
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int error = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(wait.count()));
      socklen_t size = sizeof error;
      error = ready <= 0 ? ETIMEDOUT : 0;
      if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    }
    if (error != 0) {
      why = std::strerror(error);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(why);
  return fd;
}

absl::StatusOr<std::unique_ptr<tls::TlsSession>> SecureWithKey(int fd, std::string_view key_hex,
                                                               std::chrono::milliseconds wait) {
  absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
      tls::TlsSession::StartPsk(fd, tls::TlsSide::kClient, key_hex);
  if (!session.ok()) return session.status();
  const Clock::time_point deadline = Clock::now() + wait;
  while (true) {
    const tls::TlsSession::Step step = (*session)->Handshake();
    if (step.bytes > 0) return session;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (step.wait == 0 || left <= 0) {
      return absl::UnavailableError(
          step.wait == 0 && !step.error.empty() ? step.error : "the TLS handshake did not finish");
    }
    pollfd p{fd, step.wait, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
}

std::string LocalHost(int fd) {
  sockaddr_storage local{};
  socklen_t size = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&local);
    if (::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) == nullptr) return "";
    return text;
  }
  if (local.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&local);
    if (::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text) == nullptr) return "";
    return fmt::format("[{}]", text);
  }
  return "";
}

}  // namespace cohort::step
