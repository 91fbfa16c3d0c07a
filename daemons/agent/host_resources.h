// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

/// What a node offers the scheduler, as the agent reports it at registration.
namespace cohort::agent {

struct NodeResources {
  int cpus = 1;
  std::int64_t memory_mb = 1;
  int gpus = 0;
};

/// This host's resources: online CPUs (sysconf), physical memory in MiB, and
/// the number of /dev/nvidia<N> devices. Reads /dev; call at startup, not on
/// the loop. Never fails: what cannot be read counts as the smallest value
/// (1 CPU, 1 MB, 0 GPUs).
[[nodiscard]] NodeResources DetectHostResources();

}  // namespace cohort::agent
