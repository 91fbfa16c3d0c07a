// SPDX-License-Identifier: Apache-2.0
#include "rpc/accept_loop.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "controller_log.h"

namespace cohort::controller {

AcceptLoop::AcceptLoop(int listen_fd, std::function<void(int fd)> on_accept)
    : listen_fd_(listen_fd), on_accept_(std::move(on_accept)) {}

AcceptLoop::~AcceptLoop() { Stop(); }

void AcceptLoop::Start() {
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

void AcceptLoop::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  thread_.join();
  if (spare_fd_ >= 0) ::close(spare_fd_);
  spare_fd_ = -1;
}

void AcceptLoop::Run() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      on_accept_(fd);
      continue;
    }
    const int error = errno;
    if (stopping_) break;
    switch (error) {
      case EINTR:
      case ECONNABORTED:
      case EAGAIN:
        continue;
      case EMFILE:
      case ENFILE:
        Shed(error);
        continue;
      default:
        // ENOBUFS, ENOMEM and the like pass: wait a little, not spin.
        Log("rpc")->warn("accept_failed error={:?}; retrying", std::strerror(error));
        ::usleep(10'000);
    }
  }
}

void AcceptLoop::Shed(int error) {
  const std::uint64_t shed = ++shed_;
  // Logged at the first and then every 1000th, not once per connection.
  if (shed % 1000 == 1) {
    Log("rpc")->warn(
        "connections_shed total={} error={:?}; out of descriptors (raise LimitNOFILE, or find "
        "who holds connections open)",
        shed, std::strerror(error));
  }
  if (spare_fd_ >= 0) {
    ::close(spare_fd_);
    spare_fd_ = -1;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (spare_fd_ >= 0) return;
  }
  // No spare to give up (another thread took it back first): wait for a
  // descriptor rather than spin on the queue.
  ::usleep(10'000);
}

}  // namespace cohort::controller
