// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/launch/node_layout.h"

/// What a node offers the scheduler, as the agent reports it at registration.
namespace cohort::agent {

struct NodeResources {
  int cpus = 1;
  std::int64_t memory_mb = 1;
  int gpus = 0;
  /// GPU locality groups (cohort::layout::GpuGroups): one mask of GPU indices
  /// per NUMA node; empty when unknown.
  std::vector<std::uint64_t> gpu_groups;
  /// Its GPUs' NVLink domain, "CLUSTERUUID/CLIQUE" (nvml_fabric.h); empty:
  /// none known (no NVIDIA driver, or no NVLink fabric).
  std::string nvlink_domain;
};

/// A layout's resources: its hardware threads, memory (at least 1 MB), GPUs
/// and their locality groups.
[[nodiscard]] NodeResources ResourcesFromLayout(const layout::NodeLayout& layout);

/// This host's resources without hwloc: online CPUs (sysconf), physical
/// memory in MiB, and the number of /dev/nvidia<N> devices. The fallback
/// when hwloc fails. Reads /dev; call at startup, not on the loop. Never
/// fails: what cannot be read counts as the smallest value (1 CPU, 1 MB, 0
/// GPUs).
[[nodiscard]] NodeResources DetectHostResources();

/// The numbers N of this host's /dev/nvidia<N> devices, ascending (not
/// nvidiactl, nvidia-uvm or nvidia-caps). Reads /dev.
[[nodiscard]] std::vector<int> NvidiaDeviceNumbers();

}  // namespace cohort::agent
