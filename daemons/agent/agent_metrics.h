// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cohort/text/prometheus_text.h"

/// The agent's Prometheus metrics (`--http-port`, docs/operations.md#metrics):
/// per node it speaks for, the launches it started and those that failed,
/// how long a launch took from its order to its ranks running (the stepd's
/// start), the ranks alive, and which GPUs jobs hold. Labels are bounded
/// (node, GPU index, outcome); never a job.
namespace cohort::agent {

/// One node's counts, kept by its AgentNode on the agent's loop thread.
struct NodeMetrics {
  NodeMetrics();

  std::string node;
  std::uint64_t launches_started = 0;  ///< ranks running (RanksStarted sent)
  std::uint64_t launches_failed = 0;   ///< LaunchFailed sent
  metrics::Histogram stepd_start;      ///< seconds from the Launch to its ranks running
  int gpus = 0;
  std::uint64_t gpus_allocated = 0;  ///< mask: GPUs of launches alive now
  std::size_t live_ranks = 0;
};

/// The exposition of every node's metrics. Pure.
[[nodiscard]] std::string RenderAgentMetrics(std::span<const NodeMetrics> nodes);

}  // namespace cohort::agent
