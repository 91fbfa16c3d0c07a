// SPDX-License-Identifier: Apache-2.0
#include "transport/resolver.h"

#include <ares.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "absl/status/status.h"

namespace cohort::cli {
namespace {

struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<Endpoint> endpoints;
};

extern "C" void LookupDone(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
  auto& lookup = *static_cast<Lookup*>(arg);
  lookup.done = true;
  lookup.status = status;
  if (info == nullptr) return;
  for (const ares_addrinfo_node* node = info->nodes; node != nullptr; node = node->ai_next) {
    if (node->ai_addr == nullptr || node->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Endpoint endpoint;
    std::memcpy(&endpoint.address, node->ai_addr, node->ai_addrlen);
    endpoint.length = node->ai_addrlen;
    lookup.endpoints.push_back(endpoint);
  }
  ares_freeaddrinfo(info);
}

// The channel, destroyed on every way out.
struct Channel {
  ares_channel channel = nullptr;
  ~Channel() {
    if (channel != nullptr) ares_destroy(channel);
  }
};

}  // namespace

absl::StatusOr<std::vector<Endpoint>> ResolveHost(const std::string& host, std::uint16_t port,
                                                  std::chrono::system_clock::time_point deadline) {
  static std::once_flag initialised;
  static int init_status = ARES_SUCCESS;
  std::call_once(initialised, [] { init_status = ares_library_init(ARES_LIB_INIT_ALL); });
  const auto failed = [&](int status) {
    return absl::UnavailableError(
        fmt::format("cannot resolve the host name \"{}\": {}", host, ares_strerror(status)));
  };
  if (init_status != ARES_SUCCESS) return failed(init_status);
  Channel channel;
  if (const int status = ares_init(&channel.channel); status != ARES_SUCCESS) {
    return failed(status);
  }
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NUMERICSERV;
  Lookup lookup;
  const std::string service = std::to_string(port);
  ares_getaddrinfo(channel.channel, host.c_str(), service.c_str(), &hints, LookupDone, &lookup);
  // A name in /etc/hosts (or an address) is answered at once; DNS needs its
  // sockets served until the answer or the deadline.
  while (!lookup.done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::system_clock::now())
                          .count();
    if (left <= 0) {
      ares_cancel(channel.channel);
      return absl::DeadlineExceededError(
          fmt::format("resolving the host name \"{}\" took too long", host));
    }
    ares_socket_t sockets[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel.channel, sockets, ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> polled;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;
      if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
      if (events != 0) polled.push_back({.fd = sockets[i], .events = events, .revents = 0});
    }
    timeval most{.tv_sec = static_cast<time_t>(left / 1000),
                 .tv_usec = static_cast<suseconds_t>(left % 1000 * 1000)};
    timeval wait{};
    const timeval* until = ares_timeout(channel.channel, &most, &wait);
    const int timeout_ms = static_cast<int>(until->tv_sec * 1000 + (until->tv_usec + 999) / 1000);
    const int ready = ::poll(polled.data(), polled.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(
          fmt::format("resolving the host name \"{}\": poll: {}", host, std::strerror(errno)));
    }
    if (ready <= 0) {
      ares_process_fd(channel.channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
      continue;
    }
    for (const pollfd& p : polled) {
      if (p.revents == 0) continue;
      ares_process_fd(channel.channel,
                      (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0 ? p.fd : ARES_SOCKET_BAD,
                      (p.revents & POLLOUT) != 0 ? p.fd : ARES_SOCKET_BAD);
    }
  }
  if (lookup.status != ARES_SUCCESS) return failed(lookup.status);
  if (lookup.endpoints.empty()) return failed(ARES_ENODATA);
  return std::move(lookup.endpoints);
}

}  // namespace cohort::cli
