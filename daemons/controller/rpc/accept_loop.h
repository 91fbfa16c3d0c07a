// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace cohort::controller {

/// Accepts connections on a listening socket, on a thread of its own, and
/// hands each (non-blocking, close-on-exec) to `on_accept`, which owns it
/// from then on. Out of descriptors (EMFILE, ENFILE) it sheds instead of
/// stopping or spinning: it gives up a descriptor kept spare for the
/// purpose, accepts the connection at the head of the queue on it, closes
/// it at once, and takes the spare again, so the queue drains, clients see
/// their connection closed rather than hanging, and the listener accepts
/// as before once descriptors are free. (gRPC 1.51's own TCP listener stops
/// for good at the first EMFILE.)
class AcceptLoop {
 public:
  /// Does not start: Start does. `listen_fd` stays the caller's.
  AcceptLoop(int listen_fd, std::function<void(int fd)> on_accept);
  ~AcceptLoop();
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  void Start();
  /// Wakes the thread (shutdown of the listening socket) and joins it.
  /// Idempotent.
  void Stop();

  /// Connections closed for want of a descriptor since Start. Any thread.
  [[nodiscard]] std::uint64_t Shed() const { return shed_; }

 private:
  void Run();
  void Shed(int error);

  int listen_fd_;
  std::function<void(int fd)> on_accept_;
  int spare_fd_ = -1;  ///< /dev/null, given up to accept-and-close when out of descriptors
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> shed_{0};
};

}  // namespace cohort::controller
