// SPDX-License-Identifier: Apache-2.0
#include "nvml_fabric.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace cohort::agent {
namespace {

// The part of nvml.h (R550 and later) this reads, restated: NVML is loaded
// at run time, so its header is not needed to build.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDevice;
constexpr std::size_t kFabricUuidLength = 16;
constexpr unsigned char kFabricStateCompleted = 3;
struct NvmlGpuFabricInfo {
  std::array<unsigned char, kFabricUuidLength> cluster_uuid;
  NvmlReturn status;
  unsigned int clique_id;
  unsigned char state;
};
constexpr unsigned kMaxGpus = 64;

struct LibraryCloser {
  void operator()(void* handle) const { ::dlclose(handle); }
};

template <typename Function>
Function* Symbol(void* library, const char* name) {
  return reinterpret_cast<Function*>(
      ::dlsym(library, name));  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

}  // namespace

std::string NvmlLibrary() {
  const char* chosen = std::getenv("COHORT_NVML_LIBRARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : "libnvidia-ml.so.1";
}

absl::StatusOr<std::vector<GpuFabric>> ReadGpuFabrics(const std::string& library) {
  std::unique_ptr<void, LibraryCloser> handle(::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* why = ::dlerror();
    return absl::NotFoundError(
        fmt::format("NVML ({}) cannot be loaded: {}", library, why != nullptr ? why : "unknown"));
  }
  auto* init = Symbol<NvmlReturn()>(handle.get(), "nvmlInit_v2");
  auto* shutdown = Symbol<NvmlReturn()>(handle.get(), "nvmlShutdown");
  auto* count = Symbol<NvmlReturn(unsigned*)>(handle.get(), "nvmlDeviceGetCount_v2");
  auto* by_index =
      Symbol<NvmlReturn(unsigned, NvmlDevice**)>(handle.get(), "nvmlDeviceGetHandleByIndex_v2");
  auto* fabric_info = Symbol<NvmlReturn(NvmlDevice*, NvmlGpuFabricInfo*)>(
      handle.get(), "nvmlDeviceGetGpuFabricInfo");
  if (init == nullptr || shutdown == nullptr || count == nullptr || by_index == nullptr ||
      fabric_info == nullptr) {
    return absl::FailedPreconditionError(fmt::format(
        "NVML ({}) has no nvmlDeviceGetGpuFabricInfo: a driver older than R550 knows no NVLink "
        "fabric",
        library));
  }
  if (const NvmlReturn started = init(); started != kNvmlSuccess) {
    return absl::FailedPreconditionError(
        fmt::format("nvmlInit_v2 failed with NVML error {}", started));
  }
  std::vector<GpuFabric> fabrics;
  unsigned gpus = 0;
  NvmlReturn result = count(&gpus);
  for (unsigned i = 0; result == kNvmlSuccess && i < gpus && i < kMaxGpus; ++i) {
    NvmlDevice* device = nullptr;
    GpuFabric& fabric = fabrics.emplace_back();
    NvmlGpuFabricInfo info{};
    if (by_index(i, &device) != kNvmlSuccess || fabric_info(device, &info) != kNvmlSuccess ||
        info.state != kFabricStateCompleted || info.status != kNvmlSuccess) {
      continue;  // not in a fabric (yet): no domain
    }
    for (const unsigned char byte : info.cluster_uuid) {
      fabric.cluster_uuid += fmt::format("{:02x}", byte);
    }
    fabric.clique_id = info.clique_id;
  }
  shutdown();
  if (result != kNvmlSuccess) {
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
