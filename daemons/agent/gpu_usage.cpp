// SPDX-License-Identifier: Apache-2.0
#include "gpu_usage.h"

#include <fmt/format.h>

namespace cohort::agent {
namespace {

// The part of nvml.h this reads, restated.
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned long long kMiB = 1ULL << 20;

}  // namespace

struct GpuUsageReader::Calls {
  nvml::Return (*shutdown)() = nullptr;
  nvml::Return (*count)(unsigned*) = nullptr;
  nvml::Return (*by_index)(unsigned, nvml::Device**) = nullptr;
  nvml::Return (*utilization)(nvml::Device*, NvmlUtilization*) = nullptr;
  nvml::Return (*memory)(nvml::Device*, NvmlMemory*) = nullptr;
};

absl::StatusOr<std::unique_ptr<GpuUsageReader>> GpuUsageReader::Open(const std::string& library) {
  absl::StatusOr<nvml::Library> handle = nvml::Load(library);
  if (!handle.ok()) return handle.status();
  auto calls = std::make_unique<Calls>();
  auto* init = nvml::Symbol<nvml::Return()>(*handle, "nvmlInit_v2");
  calls->shutdown = nvml::Symbol<nvml::Return()>(*handle, "nvmlShutdown");
  calls->count = nvml::Symbol<nvml::Return(unsigned*)>(*handle, "nvmlDeviceGetCount_v2");
  calls->by_index = nvml::Symbol<nvml::Return(unsigned, nvml::Device**)>(
      *handle, "nvmlDeviceGetHandleByIndex_v2");
  calls->utilization = nvml::Symbol<nvml::Return(nvml::Device*, NvmlUtilization*)>(
      *handle, "nvmlDeviceGetUtilizationRates");
  calls->memory =
      nvml::Symbol<nvml::Return(nvml::Device*, NvmlMemory*)>(*handle, "nvmlDeviceGetMemoryInfo");
  if (init == nullptr || calls->shutdown == nullptr || calls->count == nullptr ||
      calls->by_index == nullptr || calls->utilization == nullptr || calls->memory == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("NVML ({}) lacks the calls that read utilization and memory", library));
  }
  if (const nvml::Return started = init(); started != nvml::kSuccess) {
    return absl::FailedPreconditionError(
        fmt::format("nvmlInit_v2 failed with NVML error {}", started));
  }
  return std::unique_ptr<GpuUsageReader>(new GpuUsageReader(*std::move(handle), std::move(calls)));
}

GpuUsageReader::GpuUsageReader(nvml::Library library, std::unique_ptr<Calls> calls)
    : library_(std::move(library)), calls_(std::move(calls)) {}

GpuUsageReader::~GpuUsageReader() { calls_->shutdown(); }

std::vector<GpuReading> GpuUsageReader::Read() const {
  std::vector<GpuReading> readings;
  unsigned gpus = 0;
  if (calls_->count(&gpus) != nvml::kSuccess) return readings;
  for (unsigned i = 0; i < gpus && i < nvml::kMaxGpus; ++i) {
    GpuReading& reading = readings.emplace_back();
    nvml::Device* device = nullptr;
    if (calls_->by_index(i, &device) != nvml::kSuccess) continue;
    NvmlUtilization utilization{};
    if (calls_->utilization(device, &utilization) == nvml::kSuccess && utilization.gpu <= 100) {
      reading.util_pct = static_cast<int>(utilization.gpu);
    }
    NvmlMemory memory{};
    if (calls_->memory(device, &memory) == nvml::kSuccess) {
      reading.mem_used_mb = static_cast<std::int64_t>(memory.used / kMiB);
    }
  }
  return readings;
}

}  // namespace cohort::agent
