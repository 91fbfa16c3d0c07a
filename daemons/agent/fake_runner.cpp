// SPDX-License-Identifier: Apache-2.0
#include "fake_runner.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "agent_log.h"
#include "launch_plans.h"
#include "launch_tasks.h"

namespace cohort::agent {
namespace {

constexpr std::string_view kRuntimeVariable = "COHORT_FAKE_RUNTIME";
constexpr std::string_view kExitVariable = "COHORT_FAKE_EXIT";
// A fake rank runs at most a year: enough for any trace, and far from
// overflowing the timer's clock.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

// Seconds in "12", "1.5", "90s", "2m", "3h", "1d" (GNU sleep's forms).
std::optional<double> ParseSeconds(std::string_view text) {
  double scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 's':
        scale = 1;
        text.remove_suffix(1);
        break;
      case 'm':
        scale = 60;
        text.remove_suffix(1);
        break;
      case 'h':
        scale = 3600;
        text.remove_suffix(1);
        break;
      case 'd':
        scale = 86400;
        text.remove_suffix(1);
        break;
      default:
        break;
    }
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < 0 || value * scale > kMaxSeconds) {
    return std::nullopt;
  }
  return value * scale;
}

std::chrono::milliseconds ToMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
}

// Whether a process that does not handle `signal` ends by it. Stop signals
// and those ignored by default leave it running.
bool EndsProcess(int signal) {
  switch (signal) {
    case SIGCHLD:
    case SIGCONT:
    case SIGURG:
    case SIGWINCH:
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
      return false;
    default:
      return true;
  }
}

}  // namespace

absl::StatusOr<FakeOutcome> ReadFakeOutcome(const v1::JobSpec& spec) {
  FakeOutcome outcome;
  bool runtime_set = false;
  for (const v1::EnvVar& var : spec.env()) {
    if (var.name() == kRuntimeVariable) {
      const std::optional<double> seconds = ParseSeconds(var.value());
      if (!seconds) {
        return absl::InvalidArgumentError(
            fmt::format("{}={:?} is not a duration; write seconds from 0 to {} (such as 30 or 1.5)",
                        kRuntimeVariable, var.value(), static_cast<std::int64_t>(kMaxSeconds)));
      }
      outcome.runtime = ToMillis(*seconds);
      runtime_set = true;
    } else if (var.name() == kExitVariable) {
      int code = 0;
      const std::string& text = var.value();
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), code);
      if (text.empty() || error != std::errc() || end != text.data() + text.size() || code < 0 ||
          code > 255) {
        return absl::InvalidArgumentError(fmt::format(
            "{}={:?} is not an exit code; write a number from 0 to 255", kExitVariable, text));
      }
      outcome.exit_code = code;
    }
  }
  if (runtime_set || spec.argv().empty()) return outcome;
  std::string_view program = spec.argv(0);
  program =
      program.substr(program.rfind('/') == std::string_view::npos ? 0 : program.rfind('/') + 1);
  if (program == "sleep" && spec.argv_size() == 2) {
    const std::optional<double> seconds = ParseSeconds(spec.argv(1));
    if (!seconds) {
      return absl::InvalidArgumentError(
          fmt::format("sleep {:?}: not a duration fake execution can read; write seconds "
                      "(30, 1.5, 2m, 3h, 1d) or set {}",
                      spec.argv(1), kRuntimeVariable));
    }
    outcome.runtime = ToMillis(*seconds);
  } else if (program == "false") {
    outcome.exit_code = 1;
  }
  return outcome;
}

FakeRunner::FakeRunner(boost::asio::io_context& loop, const NodeSetup& node, SendToController send)
    : loop_(loop), setup_(node), node_(setup_.name), send_(std::move(send)) {}

void FakeRunner::Refuse(const v1::Launch& launch, const std::string& reason) {
  const std::string text = fmt::format("{}: {}", node_, reason);
  LaunchLog().warn("launch_failed job={} node={} attempt={} reason={:?}", launch.job_id(), node_,
                   launch.attempt(), text);
  v1::AgentMessage failed;
  failed.mutable_launch_failed()->set_job_id(launch.job_id());
  failed.mutable_launch_failed()->set_attempt(launch.attempt());
  failed.mutable_launch_failed()->set_reason(text);
  if (launch.has_step()) failed.mutable_launch_failed()->set_step(launch.step());
  send_(std::move(failed));
  if (launch.has_step()) return;  // the job's own launch goes on
  v1::AgentMessage released;
  released.mutable_job_released()->set_job_id(launch.job_id());
  released.mutable_job_released()->set_attempt(launch.attempt());
  send_(std::move(released));
}

void FakeRunner::Launch(const v1::Launch& launch) {
  const std::int64_t job_id = launch.job_id();
  if (launch.has_step()) {
    // A fake batch script runs no `cohort run`; a step can only come from
    // a client that calls StartStep itself.
    Refuse(launch, "fake execution (--fake-exec) runs no job steps");
    return;
  }
  if (const auto old = runs_.find(job_id); old != runs_.end()) {
    if (!old->second.live_ranks.empty()) {
      LaunchLog().warn("launch_ignored job={} node={} attempt={} reason={:?}", job_id, node_,
                       launch.attempt(), "the job already has ranks on this node");
      return;
    }
    runs_.erase(old);  // a finished earlier launch: the new one counts
  }
  absl::StatusOr<FakeOutcome> outcome = ReadFakeOutcome(launch.spec());
  if (!outcome.ok()) {
    Refuse(launch, std::string(outcome.status().message()));
    return;
  }
  const int tasks = LaunchTasks(launch);
  Run& run = runs_[job_id];
  run.attempt = launch.attempt();
  run.batch = launch.batch();
  run.ranks = tasks;
  run.exit_code = outcome->exit_code;
  v1::AgentMessage message;
  v1::RanksStarted* started = message.mutable_ranks_started();
  started->set_job_id(job_id);
  started->set_attempt(launch.attempt());
  for (int local = 0; local < tasks; ++local) {
    const int rank = launch.node_rank() * tasks + local;
    run.live_ranks.push_back(rank);
    started->add_ranks(rank);
  }
  if (absl::StatusOr<std::vector<binding::RankBinding>> bound =
          PlanBindings(setup_.layout, launch, {});
      bound.ok()) {
    for (v1::RankBinding& b : ReportBindings(*bound, launch, node_)) {
      *started->add_bindings() = std::move(b);
    }
  }
  send_(std::move(message));
  LaunchLog().debug("launch_started job={} node={} attempt={} ranks={} fake_runtime_ms={}", job_id,
                    node_, launch.attempt(), tasks, outcome->runtime.count());
  run.timer = std::make_unique<boost::asio::steady_timer>(loop_);
  run.timer->expires_after(outcome->runtime);
  run.timer->async_wait(
      [this, job_id, attempt = launch.attempt()](const boost::system::error_code& error) {
        if (error) return;
        const auto it = runs_.find(job_id);
        if (it == runs_.end() || it->second.attempt != attempt) return;
        End(it, it->second.live_ranks, it->second.exit_code, 0);
      });
}

// `ranks` by value: a caller may pass run.live_ranks itself, which this
// changes.
void FakeRunner::End(Runs::iterator it, std::vector<int> ranks, int exit_code, int signal) {
  Run& run = it->second;
  const std::int64_t job_id = it->first;
  for (const int rank : ranks) {
    const auto live = std::find(run.live_ranks.begin(), run.live_ranks.end(), rank);
    if (live == run.live_ranks.end()) continue;
    run.live_ranks.erase(live);
    if (exit_code == 0 && signal == 0) {
      ++run.ranks_ok;
    } else if (!run.failed) {
      run.failed = true;
      run.first_exit = exit_code;
      run.first_signal = signal;
    }
    v1::AgentMessage message;
    v1::RankExited* exited = message.mutable_rank_exited();
    exited->set_job_id(job_id);
    exited->set_attempt(run.attempt);
    exited->set_rank(rank);
    exited->set_exit_code(exit_code);
    exited->set_signal(signal);
    send_(std::move(message));
  }
  if (!run.live_ranks.empty()) return;
  if (run.timer) run.timer->cancel();
  run.ended_at = std::chrono::steady_clock::now();
  LaunchLog().debug("job_released job={} node={} attempt={} exit_code={} signal={}", job_id, node_,
                    run.attempt, exit_code, signal == 0 ? "0" : SignalName(signal));
  v1::AgentMessage released;
  released.mutable_job_released()->set_job_id(job_id);
  released.mutable_job_released()->set_attempt(run.attempt);
  send_(std::move(released));
}

void FakeRunner::Signal(const v1::Signal& message) {
  const int signal = message.signal();
  const auto it = runs_.find(message.job_id());
  if (signal < 1 || signal >= NSIG || it == runs_.end() || it->second.live_ranks.empty()) {
    LaunchLog().debug("signal_ignored job={} node={} signal={} reason={:?}", message.job_id(),
                      node_, signal, "no live fake ranks of the job on this node, or no signal");
    return;
  }
  if (!EndsProcess(signal)) {
    LaunchLog().info("job_signalled job={} node={} signal={} effect=none", message.job_id(), node_,
                     SignalName(signal));
    return;
  }
  // --signal=B: reaches global rank 0's process alone; a job's signals
  // pass its batch script by, and no step runs here.
  std::vector<int> ranks = it->second.live_ranks;
  if (message.has_step() || (message.scope() == v1::SIGNAL_RANKS && it->second.batch)) return;
  if (message.scope() == v1::SIGNAL_BATCH) {
    if (ranks.front() != 0) return;
    ranks = {0};
  }
  LaunchLog().info("job_signalled job={} node={} signal={} ranks={}", message.job_id(), node_,
                   SignalName(signal), ranks.size());
  End(it, ranks, 0, signal);
}

void FakeRunner::PrepareImage(const v1::PrepareImage& prepare) {
  v1::AgentMessage message;
  v1::ImagePrepared& prepared = *message.mutable_image_prepared();
  prepared.set_job_id(prepare.job_id());
  prepared.set_image(prepare.image());
  prepared.set_error("the agent runs no processes (--fake-exec), so it pulls no image");
  send_(std::move(message));
}

void FakeRunner::Terminate(const v1::Terminate& message) {
  if (message.has_step()) return;  // no step runs here
  const auto it = runs_.find(message.job_id());
  if (it == runs_.end() || it->second.live_ranks.empty()) {
    // Nothing runs here: the controller may free the node now.
    v1::AgentMessage released;
    released.mutable_job_released()->set_job_id(message.job_id());
    released.mutable_job_released()->set_attempt(message.attempt() != 0 ? message.attempt()
                                                 : it == runs_.end()    ? 0
                                                                        : it->second.attempt);
    send_(std::move(released));
    return;
  }
  LaunchLog().info("job_terminating job={} node={} signal=TERM ranks={}", message.job_id(), node_,
                   it->second.live_ranks.size());
  End(it, it->second.live_ranks, 0, SIGTERM);
}

void FakeRunner::Fence() {
  for (auto it = runs_.begin(); it != runs_.end(); ++it) {
    if (it->second.live_ranks.empty()) continue;
    LaunchLog().warn("job_fenced job={} node={} ranks={}", it->first, node_,
                     it->second.live_ranks.size());
    End(it, it->second.live_ranks, 0, SIGKILL);
  }
}

void FakeRunner::AddTo(v1::Register& message) const {
  for (const auto& [job_id, run] : runs_) {
    if (!run.live_ranks.empty()) {
      v1::RunningJob* running = message.add_running();
      running->set_job_id(job_id);
      running->set_attempt(run.attempt);
      for (const int rank : run.live_ranks) running->add_ranks(rank);
      running->set_ranks_ok(run.ranks_ok);
      continue;
    }
    v1::FinishedJob* finished = message.add_finished();
    finished->set_job_id(job_id);
    finished->set_attempt(run.attempt);
    finished->set_ranks(run.ranks);
    finished->set_ranks_ok(run.ranks_ok);
    finished->set_failed(run.failed);
    finished->set_exit_code(run.first_exit);
    finished->set_signal(run.first_signal);
  }
}

void FakeRunner::Prune(std::chrono::steady_clock::time_point now) {
  std::erase_if(runs_, [&](const auto& entry) {
    return entry.second.live_ranks.empty() && now - entry.second.ended_at >= kFinishedRetention;
  });
}

void FakeRunner::Stop() {
  for (auto& [job_id, run] : runs_) {
    if (run.timer) run.timer->cancel();
  }
}

std::size_t FakeRunner::LiveRanks() const {
  std::size_t count = 0;
  for (const auto& [job_id, run] : runs_) count += run.live_ranks.size();
  return count;
}

}  // namespace cohort::agent
