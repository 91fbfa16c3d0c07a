// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cohort/text/prometheus_text.h"
#include "step_events.h"

/// The agent's Prometheus metrics (`--http-port`, docs/operations.md#metrics):
/// per node it speaks for, the launches it started and those that failed,
/// how long a launch took from its order to its ranks running (the stepd's
/// start), the ranks alive, which GPUs jobs hold, and how steps' container
/// images were had (pulled, from the cache, failed: counts, bytes, seconds).
/// Labels are bounded (node, GPU index, outcome); never a job or an image.
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
  /// Steps' container images, by ImageOutcome; the disk space of those
  /// pulled;
  /// the seconds each took (a cached one: reading the cache).
  std::array<std::uint64_t, 3> image_pulls{};
  std::uint64_t image_pull_bytes = 0;
  metrics::Histogram image_pull_time;
  /// Images pulled ahead of a job's start (PrepareImage), by ImageOutcome;
  /// their bytes count in image_pull_bytes.
  std::array<std::uint64_t, 3> images_ahead{};

  /// Counts one step's image.
  void CountImage(const step::ImageEvent& image);
  /// Counts one pull ahead: `bytes` is the image's size when it was fetched.
  void CountImageAhead(bool ok, bool cached, std::int64_t bytes);
};

/// The exposition of every node's metrics. Pure.
[[nodiscard]] std::string RenderAgentMetrics(std::span<const NodeMetrics> nodes);

}  // namespace cohort::agent
