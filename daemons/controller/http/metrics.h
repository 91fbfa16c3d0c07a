// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "agents/usage_book.h"
#include "cohort/engine/engine.h"
#include "cohort/text/prometheus_text.h"

/// The controller's Prometheus metrics (docs/operations.md#metrics): what
/// it counts as it goes (submissions, starts, ends, preemptions, scheduling
/// passes) and, at each scrape, gauges of the engine's jobs, nodes and GPUs.
/// Labels are bounded: states, partitions, pending reasons, switches,
/// accounts; a job only in the usage series of the running jobs sampled,
/// at most MetricsJobSeries= of them (those holding the most GPUs). Used on
/// the state thread only.
namespace cohort::controller {

/// What the controller's bounds turned away (docs/operations.md,
/// "Resource bounds"), for the exposition.
struct Refusals {
  std::uint64_t rpc_connections_refused = 0;   ///< the HTTP/2 guard: a bound passed, or a cap
  std::uint64_t rpc_connections_shed = 0;      ///< TCP and local socket, out of descriptors
  std::uint64_t http_connections_refused = 0;  ///< the HTTP port: one address at its bound
  std::uint64_t http_connections_shed = 0;     ///< the HTTP port, out of descriptors
  std::uint64_t rpc_calls_refused = 0;         ///< a user past their calls a second
  std::uint64_t agent_reports_refused = 0;     ///< about a job with no rank on the node
  std::uint64_t state_write_stalls = 0;        ///< commits refused for want of space
  bool state_writes_refused = false;           ///< now: changes are refused (disk full)
};

class ControllerMetrics {
 public:
  ControllerMetrics();

  /// Counts what the engine reported: a new job is a submission, PENDING to
  /// RUNNING a start, a finished state an end, a preemption by its mode.
  void Count(std::span<const JobTransition> transitions);
  /// One scheduling pass of `kind` (Engine::LastPassKind) that took `took`.
  void Pass(std::string_view kind, std::chrono::steady_clock::duration took);
  /// One call of the Controller service's `method`, from its arrival to its
  /// answer (the commit it waited for included).
  void Rpc(std::string_view method, std::chrono::steady_clock::duration took);
  /// One commit of the state database: how long it took, and how many job
  /// and node records and waiting answers it carried (the group commit's
  /// batch).
  void Commit(std::chrono::steady_clock::duration took, std::size_t records, std::size_t waiting);

  /// The exposition: the counters, and gauges of `engine` now, with
  /// `agent_streams` nodes whose agent is connected, what the bounds
  /// turned away, and what running jobs use (`usage`, at most `job_series`
  /// jobs).
  [[nodiscard]] std::string Render(const Engine& engine, std::size_t agent_streams,
                                   const Refusals& refusals = {}, const UsageBook* usage = nullptr,
                                   int job_series = 0) const;

 private:
  std::uint64_t submitted_ = 0;
  std::uint64_t started_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> ended_;        ///< by final state
  std::map<std::string, std::uint64_t, std::less<>> preempted_;    ///< by mode
  std::map<std::string, metrics::Histogram, std::less<>> passes_;  ///< by kind
  std::map<std::string, metrics::Histogram, std::less<>> rpcs_;    ///< by method
  metrics::Histogram commit_seconds_;
  metrics::Histogram commit_records_;
  metrics::Histogram commit_waiting_;
};

}  // namespace cohort::controller
