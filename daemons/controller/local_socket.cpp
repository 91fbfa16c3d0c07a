// SPDX-License-Identifier: Apache-2.0
#include "local_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <grpcpp/server_posix.h>

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

void LocalSocket::Serve(grpc::Server* server) {
  accepting_ = std::make_unique<AcceptLoop>(listen_fd_, [this, server](int fd) {
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
      ::close(fd);
      return;
    }
    {
      const std::lock_guard lock(mutex_);
      peers_[fmt::format("fd:{}", fd)] = credentials.uid;
    }
    grpc::AddInsecureChannelFromFd(server, fd);
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

std::optional<std::uint32_t> LocalSocket::PeerUid(const std::string& peer) const {
  const std::lock_guard lock(mutex_);
  const auto it = peers_.find(peer);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

}  // namespace cohort::controller
