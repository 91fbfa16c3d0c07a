// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent_options.h"
#include "cohort/engine/engine_types.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "launch_runner.h"

/// Launches that run no process: the agent's fake execution (--fake-exec).
namespace cohort::agent {

/// How a fake launch's ranks end: after `runtime`, with `exit_code`.
struct FakeOutcome {
  std::chrono::milliseconds runtime{0};
  int exit_code = 0;
};

/// Reads what a job's ranks would do from its spec, without running them:
/// the environment variable COHORT_FAKE_RUNTIME=SECONDS (a decimal number)
/// first; else the command: `sleep S` (S seconds, with GNU sleep's s, m, h
/// and d suffixes) runs S seconds and exits 0, `false` exits 1 at once, any
/// other command (`true`, a script) exits 0 at once. COHORT_FAKE_EXIT=CODE
/// sets the exit code. Returns InvalidArgument naming the variable or word
/// that cannot be read and how to write it.
[[nodiscard]] absl::StatusOr<FakeOutcome> ReadFakeOutcome(const v1::JobSpec& spec);

/// One emulated node's launches under fake execution. A Launch is
/// acknowledged at once (RanksStarted with the binding plan, no pids); each
/// rank "runs" on an Asio timer for the job's FakeOutcome runtime, then
/// RankExited and, once every rank of the node has ended, JobReleased are
/// sent. A Signal whose default action ends a process (TERM, INT, KILL,
/// USR1, …) ends the ranks it reaches by that signal, as it would end a
/// process that does not handle it; one that is ignored or stops a process
/// (CHLD, CONT, STOP, …) changes nothing. Terminate ends them by SIGTERM at
/// once. No process, thread or file per node or launch: one timer per live
/// launch. Lives on, and is used only from, the agent's loop thread.
class FakeRunner final : public LaunchRunner {
 public:
  /// How long a finished launch is kept and reported in Register.
  static constexpr std::chrono::minutes kFinishedRetention = kAgentKeepsFinishedLaunches;

  /// `send` queues a message on the node's stream; `node` (its name and
  /// layout, for the binding plan RanksStarted reports) must outlive it.
  FakeRunner(boost::asio::io_context& loop, const NodeSetup& node, SendToController send);

  /// Nothing to take on: fake launches leave nothing behind.
  void Start() override {}
  /// Starts the ranks of `launch`. A plan that cannot be made is reported
  /// with RanksStarted left bare: fake ranks bind to nothing.
  void Launch(const v1::Launch& launch) override;
  void Signal(const v1::Signal& signal) override;
  void Terminate(const v1::Terminate& terminate) override;
  /// No process runs, so no image is pulled: answered with that.
  void PrepareImage(const v1::PrepareImage& prepare) override;
  /// Lists live launches (running) and finished ones (finished).
  void AddTo(v1::Register& message) const override;
  /// Forgets finished launches older than kFinishedRetention.
  void Poll() override { Prune(std::chrono::steady_clock::now()); }
  void OnStepNotice(step::LaunchId /*id*/) override {}
  /// Cancels every timer: the agent stops and the ranks are "left running".
  void Stop() override;
  void Fence() override;
  [[nodiscard]] std::size_t LiveRanks() const override;
  void AddMetrics(NodeMetrics& /*metrics*/) const override {}

  /// Forgets finished launches older than kFinishedRetention at `now`.
  void Prune(std::chrono::steady_clock::time_point now);

 private:
  struct Run {
    int attempt = 0;
    std::vector<int> live_ranks;  ///< global ranks, ascending
    int ranks = 0;
    int ranks_ok = 0;
    bool batch = false;    ///< a batch script's one "rank"
    int exit_code = 0;     ///< the exit code the ranks end with when their time is up
    bool failed = false;   ///< a rank ended otherwise than by exit code 0
    int first_exit = 0;    ///< the first failure's exit code …
    int first_signal = 0;  ///< … or signal
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::chrono::steady_clock::time_point ended_at{};
  };
  using Runs = std::map<std::int64_t, Run>;

  /// Ends `ranks` of the run: exit `exit_code` or signal `signal`.
  void End(Runs::iterator it, std::vector<int> ranks, int exit_code, int signal);
  void Refuse(const v1::Launch& launch, const std::string& reason);

  boost::asio::io_context& loop_;
  const NodeSetup& setup_;
  const std::string& node_;  ///< setup_.name
  SendToController send_;
  Runs runs_;  ///< by job id; at most one launch of a job per node
};

}  // namespace cohort::agent
