// SPDX-License-Identifier: Apache-2.0
#include "agent_metrics.h"

namespace cohort::agent {

using metrics::Exposition;
using metrics::MetricType;

NodeMetrics::NodeMetrics()
    : stepd_start(metrics::DurationBounds()), image_pull_time(metrics::DurationBounds()) {}

void NodeMetrics::CountImage(const step::ImageEvent& image) {
  ++image_pulls[static_cast<std::size_t>(image.outcome)];
  image_pull_bytes += static_cast<std::uint64_t>(image.bytes);
  image_pull_time.Observe(static_cast<double>(image.ms) / 1000.0);
}

void NodeMetrics::CountImageAhead(bool ok, bool cached, std::int64_t bytes) {
  const step::ImageOutcome outcome = !ok      ? step::ImageOutcome::kFailed
                                     : cached ? step::ImageOutcome::kCached
                                              : step::ImageOutcome::kPulled;
  ++images_ahead[static_cast<std::size_t>(outcome)];
  if (outcome == step::ImageOutcome::kPulled) image_pull_bytes += static_cast<std::uint64_t>(bytes);
}

std::string RenderAgentMetrics(std::span<const NodeMetrics> nodes) {
  Exposition out;
  out.Family("cohort_agent_launches_total", MetricType::kCounter,
             "Launches (a job's or a step's ranks on a node), by outcome: started or failed.");
  for (const NodeMetrics& n : nodes) {
    out.Sample("cohort_agent_launches_total", {{"node", n.node}, {"outcome", "started"}},
               static_cast<double>(n.launches_started));
    out.Sample("cohort_agent_launches_total", {{"node", n.node}, {"outcome", "failed"}},
               static_cast<double>(n.launches_failed));
  }
  out.Family("cohort_agent_stepd_start_seconds", MetricType::kHistogram,
             "From a launch's order to its ranks running: the cohort-stepd's start, binding "
             "and exec.");
  for (const NodeMetrics& n : nodes) {
    n.stepd_start.Write(out, "cohort_agent_stepd_start_seconds", {{"node", n.node}});
  }
  out.Family("cohort_agent_ranks", MetricType::kGauge, "Ranks alive on each node.");
  for (const NodeMetrics& n : nodes) {
    out.Sample("cohort_agent_ranks", {{"node", n.node}}, static_cast<double>(n.live_ranks));
  }
  out.Family("cohort_agent_gpu_allocated", MetricType::kGauge,
             "1 when a launch alive on the node holds the GPU, else 0.");
  for (const NodeMetrics& n : nodes) {
    for (int gpu = 0; gpu < n.gpus; ++gpu) {
      out.Sample("cohort_agent_gpu_allocated", {{"node", n.node}, {"gpu", std::to_string(gpu)}},
                 (n.gpus_allocated >> gpu) & 1U);
    }
  }
  const auto by_outcome = [&out, nodes](const char* name, const char* help,
                                        std::array<std::uint64_t, 3> NodeMetrics::*counts) {
    out.Family(name, MetricType::kCounter, help);
    for (const NodeMetrics& n : nodes) {
      for (const step::ImageOutcome outcome :
           {step::ImageOutcome::kPulled, step::ImageOutcome::kCached,
            step::ImageOutcome::kFailed}) {
        out.Sample(name,
                   {{"node", n.node}, {"outcome", std::string(step::ImageOutcomeName(outcome))}},
                   static_cast<double>((n.*counts)[static_cast<std::size_t>(outcome)]));
      }
    }
  };
  by_outcome("cohort_agent_container_images_total",
             "Steps' container images on the node, by outcome: pulled from a registry, found in "
             "the node's cache, or failed.",
             &NodeMetrics::image_pulls);
  by_outcome("cohort_agent_container_images_ahead_total",
             "Images pulled ahead of a pending job's start on a node planned for it, by outcome: "
             "pulled from a registry, found in the node's cache, or failed.",
             &NodeMetrics::images_ahead);
  out.Family("cohort_agent_container_pulled_bytes_total", MetricType::kCounter,
             "The disk space of the images the node pulled, unpacked.");
  for (const NodeMetrics& n : nodes) {
    out.Sample("cohort_agent_container_pulled_bytes_total", {{"node", n.node}},
               static_cast<double>(n.image_pull_bytes));
  }
  out.Family("cohort_agent_container_image_seconds", MetricType::kHistogram,
             "How long a step waited for its container image: a pull, or reading the cache.");
  for (const NodeMetrics& n : nodes) {
    n.image_pull_time.Write(out, "cohort_agent_container_image_seconds", {{"node", n.node}});
  }
  return out.Take();
}

}  // namespace cohort::agent
