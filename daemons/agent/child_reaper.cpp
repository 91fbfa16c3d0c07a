// SPDX-License-Identifier: Apache-2.0
#include "child_reaper.h"

#include <signal.h>
#include <sys/wait.h>

#include <boost/system/error_code.hpp>
#include <cerrno>
#include <utility>

#include "agent_log.h"

namespace cohort::agent {

ChildReaper::ChildReaper(boost::asio::io_context& loop) : signals_(loop, SIGCHLD) {}

void ChildReaper::Start() {
  Wait();
  ReapExited();
}

void ChildReaper::Stop() {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
}

void ChildReaper::Watch(pid_t pid, ExitHandler handler) {
  handlers_.insert_or_assign(pid, std::move(handler));
}

void ChildReaper::Wait() {
  signals_.async_wait([this](const boost::system::error_code& error, int /*signal*/) {
    if (error) return;  // cancelled: the agent is stopping
    ReapExited();
    Wait();
  });
}

void ChildReaper::ReapExited() {
  // SIGCHLDs coalesce: one signal may stand for many exits.
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid == 0) return;
    if (pid < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: no children left
    }
    const auto it = handlers_.find(pid);
    if (it == handlers_.end()) {
      LaunchLog().debug("child_reaped_unwatched pid={} status={}", pid, status);
      continue;
    }
    ExitHandler handler = std::move(it->second);
    handlers_.erase(it);
    handler(status);
  }
}

}  // namespace cohort::agent
