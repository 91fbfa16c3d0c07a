// SPDX-License-Identifier: Apache-2.0
#include "nvml_fabric.h"

#include <array>

#include <fmt/format.h>

#include "nvml_library.h"

namespace cohort::agent {
namespace {

// The part of nvml.h (R550 and later) this reads, restated.
constexpr std::size_t kFabricUuidLength = 16;
constexpr unsigned char kFabricStateCompleted = 3;
struct NvmlGpuFabricInfo {
  std::array<unsigned char, kFabricUuidLength> cluster_uuid;
  nvml::Return status;
  unsigned int clique_id;
  unsigned char state;
};

}  // namespace

std::string NvmlLibrary() { return nvml::LibraryPath(); }

absl::StatusOr<std::vector<GpuFabric>> ReadGpuFabrics(const std::string& library) {
  absl::StatusOr<nvml::Library> handle = nvml::Load(library);
  if (!handle.ok()) return handle.status();
  auto* init = nvml::Symbol<nvml::Return()>(*handle, "nvmlInit_v2");
  auto* shutdown = nvml::Symbol<nvml::Return()>(*handle, "nvmlShutdown");
  auto* count = nvml::Symbol<nvml::Return(unsigned*)>(*handle, "nvmlDeviceGetCount_v2");
  auto* by_index = nvml::Symbol<nvml::Return(unsigned, nvml::Device**)>(
      *handle, "nvmlDeviceGetHandleByIndex_v2");
  auto* fabric_info = nvml::Symbol<nvml::Return(nvml::Device*, NvmlGpuFabricInfo*)>(
      *handle, "nvmlDeviceGetGpuFabricInfo");
  if (init == nullptr || shutdown == nullptr || count == nullptr || by_index == nullptr ||
      fabric_info == nullptr) {
    return absl::FailedPreconditionError(fmt::format(
        "NVML ({}) has no nvmlDeviceGetGpuFabricInfo: a driver older than R550 knows no NVLink "
        "fabric",
        library));
  }
  if (const nvml::Return started = init(); started != nvml::kSuccess) {
    return absl::FailedPreconditionError(
        fmt::format("nvmlInit_v2 failed with NVML error {}", started));
  }
  std::vector<GpuFabric> fabrics;
  unsigned gpus = 0;
  nvml::Return result = count(&gpus);
  for (unsigned i = 0; result == nvml::kSuccess && i < gpus && i < nvml::kMaxGpus; ++i) {
    nvml::Device* device = nullptr;
    GpuFabric& fabric = fabrics.emplace_back();
    NvmlGpuFabricInfo info{};
    if (by_index(i, &device) != nvml::kSuccess || fabric_info(device, &info) != nvml::kSuccess ||
        info.state != kFabricStateCompleted || info.status != nvml::kSuccess) {
      continue;  // not in a fabric (yet): no domain
    }
    for (const unsigned char byte : info.cluster_uuid) {
      fabric.cluster_uuid += fmt::format("{:02x}", byte);
    }
    fabric.clique_id = info.clique_id;
  }
  shutdown();
  if (result != nvml::kSuccess) {
    return absl::FailedPreconditionError(
        fmt::format("nvmlDeviceGetCount_v2 failed with NVML error {}", result));
  }
  return fabrics;
}

std::string NvlinkDomainOf(const std::vector<GpuFabric>& fabrics) {
  for (const GpuFabric& fabric : fabrics) {
    if (!fabric.cluster_uuid.empty()) {
      return fmt::format("{}/{}", fabric.cluster_uuid, fabric.clique_id);
    }
  }
  return {};
}

}  // namespace cohort::agent
