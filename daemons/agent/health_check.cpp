// SPDX-License-Identifier: Apache-2.0
#include "health_check.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "agent_log.h"
#include "step_launcher.h"

namespace cohort::agent {

std::string HealthReason(std::string_view output, int wait_status) {
  while (!output.empty()) {
    const std::size_t end = output.find('\n');
    std::string_view line = output.substr(0, end);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (!line.empty()) return std::string(line.substr(0, 200));
    if (end == std::string_view::npos) break;
    output.remove_prefix(end + 1);
  }
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("killed by signal {}", SignalName(WTERMSIG(wait_status)));
  }
  return fmt::format("exit code {}", WEXITSTATUS(wait_status));
}

HealthCheck::HealthCheck(boost::asio::io_context& loop, ChildReaper& reaper, std::string program,
                         std::chrono::seconds interval, std::string node, std::string output_path,
                         Verdict on_verdict)
    : reaper_(reaper),
      program_(std::move(program)),
      interval_(interval),
      node_(std::move(node)),
      output_path_(std::move(output_path)),
      on_verdict_(std::move(on_verdict)),
      next_(loop),
      deadline_(loop) {}

HealthCheck::~HealthCheck() { Stop(); }

void HealthCheck::Start() { Run(); }

void HealthCheck::Stop() {
  *alive_ = false;
  next_.cancel();
  deadline_.cancel();
  if (pid_ > 0) ::kill(pid_, SIGKILL);
  pid_ = -1;
}

void HealthCheck::Run() {
  absl::StatusOr<pid_t> pid =
      SpawnAlone(program_, {}, {"COHORT_NODENAME=" + node_, "SLURMD_NODENAME=" + node_},
                 output_path_, OpenMode::kTruncate);
  if (!pid.ok()) {
    Decide(false, std::string(pid.status().message()));
    RunLater();
    return;
  }
  pid_ = *pid;
  timed_out_ = false;
  reaper_.Watch(pid_, [this, alive = alive_](int wait_status) {
    if (*alive) OnExit(wait_status);
  });
  // A check still running when the next one is due is stuck: it is killed.
  deadline_.expires_after(interval_);
  deadline_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive || pid_ <= 0) return;
    timed_out_ = true;
    ::kill(pid_, SIGKILL);
  });
}

void HealthCheck::RunLater() {
  next_.expires_after(interval_);
  next_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (!error && *alive) Run();
  });
}

void HealthCheck::OnExit(int wait_status) {
  pid_ = -1;
  deadline_.cancel();
  if (timed_out_) {
    Decide(false, fmt::format("{} did not finish within HealthCheckInterval ({} s)", program_,
                              interval_.count()));
  } else {
    std::ifstream in(output_path_);
    std::ostringstream output;
    output << in.rdbuf();
    const bool healthy = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    Decide(healthy, healthy ? std::string() : HealthReason(output.str(), wait_status));
  }
  RunLater();
}

void HealthCheck::Decide(bool healthy, std::string reason) {
  if (healthy_ == healthy && reason_ == reason) return;
  healthy_ = healthy;
  reason_ = std::move(reason);
  if (healthy) {
    AgentLog().info("health_ok node={}", node_);
  } else {
    AgentLog().warn("health_failed node={} reason={:?}", node_, reason_);
  }
  on_verdict_(healthy, reason_);
}

}  // namespace cohort::agent
