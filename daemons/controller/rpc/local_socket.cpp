// SPDX-License-Identifier: Apache-2.0
#include "rpc/local_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cohort::controller {

LocalSocket::~LocalSocket() { Stop(); }

absl::Status LocalSocket::Listen(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        fmt::format("socket path {} is longer than {} bytes; use a shorter StateDir", path,
                    sizeof(address.sun_path) - 1));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(fmt::format("socket: {}", std::strerror(errno)));
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 512) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        fmt::format("cannot listen on {}: {}", path, std::strerror(error)));
  }
  ::chmod(path.c_str(), 0666);
  listen_fd_ = fd;
  path_ = path;
  return absl::OkStatus();
}

void LocalSocket::Serve(H2Guard& guard) {
  accepting_ = std::make_unique<AcceptLoop>(listen_fd_, [&guard](int fd) {
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
      ::close(fd);
      return;
    }
    guard.Add(fd, Peer{.kind = Peer::Kind::kLocal,
                       .uid = credentials.uid,
                       .host = "127.0.0.1",
                       .certificate_names = {}});
  });
  accepting_->Start();
}

void LocalSocket::Stop() {
  if (listen_fd_ < 0) return;
  if (accepting_) accepting_->Stop();
  ::close(listen_fd_);
  ::unlink(path_.c_str());
  listen_fd_ = -1;
}

}  // namespace cohort::controller
