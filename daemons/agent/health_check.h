// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "child_reaper.h"

/// HealthCheckProgram, as Slurm's slurmd runs it: every HealthCheckInterval
/// (the first time at once) with COHORT_NODENAME and SLURMD_NODENAME set to
/// the node, stdin from /dev/null, its output to a file; exit 0 is healthy,
/// anything else (or running past the interval, when it is killed) is not,
/// for the reason its output's first line gives. The controller drains an
/// unhealthy node and resumes it once healthy again (AgentHub::OnHealth).
namespace cohort::agent {

/// The reason a check gives: the first non-blank line of its output (at
/// most 200 characters), else how it ended ("exit code 2", "killed by
/// signal KILL"). Pure.
[[nodiscard]] std::string HealthReason(std::string_view output, int wait_status);

/// Runs the check of one node. Lives on, and is used only from, the agent's
/// loop thread; the reaper must outlive it.
class HealthCheck {
 public:
  /// Called with each verdict that differs from the last (the first too).
  using Verdict = std::function<void(bool healthy, const std::string& reason)>;

  HealthCheck(boost::asio::io_context& loop, ChildReaper& reaper, std::string program,
              std::chrono::seconds interval, std::string node, std::string output_path,
              Verdict on_verdict);
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;
  ~HealthCheck();

  /// The first run now, then one every interval.
  void Start();
  /// No more runs; one running is killed. The loop then has nothing of
  /// this check left to wait for.
  void Stop();

 private:
  void Run();
  /// The next run, an interval from now.
  void RunLater();
  void OnExit(int wait_status);
  void Decide(bool healthy, std::string reason);

  ChildReaper& reaper_;
  std::string program_;
  std::chrono::seconds interval_;
  std::string node_;
  std::string output_path_;
  Verdict on_verdict_;
  boost::asio::steady_timer next_;
  boost::asio::steady_timer deadline_;
  pid_t pid_ = -1;
  bool timed_out_ = false;
  std::optional<bool> healthy_;  ///< the last verdict sent
  std::string reason_;
  /// Cleared when this check goes; a run that ends later finds it false.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort::agent
