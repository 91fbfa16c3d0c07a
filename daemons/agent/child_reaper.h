// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstddef>
#include <functional>
#include <unordered_map>

/// Collecting the exit of the agent's child processes.
namespace cohort::agent {

/// Reaps children on SIGCHLD (an Asio signal_set and a waitpid(-1, WNOHANG)
/// loop) and calls the handler watching each pid with its wait status. Lives
/// on, and is used only from, the agent's loop thread. A child nobody watches
/// is reaped and logged.
class ChildReaper {
 public:
  /// Called once with the waitpid status when the child has exited.
  using ExitHandler = std::function<void(int wait_status)>;

  /// Installs the SIGCHLD handler; construct before starting any child.
  explicit ChildReaper(boost::asio::io_context& loop);

  /// Starts waiting for SIGCHLD, and reaps what already exited.
  void Start();
  /// Stops waiting; children still running are left alone.
  void Stop();

  /// Calls `handler` when `pid` exits. Register a child before the loop
  /// turns again after spawning it: until then it cannot be reaped.
  void Watch(pid_t pid, ExitHandler handler);

  [[nodiscard]] std::size_t Watched() const { return handlers_.size(); }

 private:
  void Wait();
  void ReapExited();

  boost::asio::signal_set signals_;
  std::unordered_map<pid_t, ExitHandler> handlers_;
};

}  // namespace cohort::agent
