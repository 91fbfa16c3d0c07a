// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

/// Which NVLink domain each GPU of this node is in, as NVIDIA's driver says
/// (NVML's GPU fabric information: a GB200/GB300 NVL72 rack is one cluster
/// UUID, partitioned into cliques). NVML is loaded at run time with dlopen:
/// it is never a build dependency, and a node without NVIDIA's driver simply
/// has none.
namespace cohort::agent {

struct GpuFabric {
  std::string cluster_uuid;  ///< 32 hex digits; empty: the GPU is in no fabric (or not yet)
  std::uint32_t clique_id = 0;
};

/// The library dlopen tries: COHORT_NVML_LIBRARY when set (tests point it
/// at a stand-in), else libnvidia-ml.so.1.
[[nodiscard]] std::string NvmlLibrary();

/// Each GPU's fabric, by NVML's index (nvidia-smi's numbering), at most 64.
/// A GPU whose fabric registration has not completed has an empty UUID.
/// NotFound when the library cannot be loaded (no NVIDIA driver);
/// FailedPrecondition when it lacks nvmlDeviceGetGpuFabricInfo (a driver
/// older than R550) or NVML fails to start. The agent goes on without.
[[nodiscard]] absl::StatusOr<std::vector<GpuFabric>> ReadGpuFabrics(const std::string& library);

/// One node's NVLink domain from its GPUs' fabrics: "UUID/clique" of the
/// first GPU in a fabric; empty when none is. Pure.
[[nodiscard]] std::string NvlinkDomainOf(const std::vector<GpuFabric>& fabrics);

}  // namespace cohort::agent
