// SPDX-License-Identifier: Apache-2.0
// A stand-in for NVIDIA's libnvidia-ml.so.1 that answers the NVML calls the
// agent makes (NVLink fabric information, utilization and memory in use)
// with recorded values, for tests on machines without NVIDIA's driver.
// COHORT_NVML_STANDIN names a file of one line per GPU: its fabric's
// cluster UUID (32 hex digits) and clique id, or "-" for a GPU whose fabric
// registration has not completed; then, optionally, its utilization in
// percent and its memory in use in MiB (else 0 and 0). The file is read
// again at each utilization or memory call, so a test may change them.
// Without the variable (or with an unreadable file) nvmlInit_v2 fails.
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Gpu {
  std::array<unsigned char, 16> uuid{};
  unsigned clique = 0;
  bool registered = false;
  unsigned util = 0;
  unsigned long long mem_mib = 0;
};

std::vector<Gpu>& Gpus() {
  static std::vector<Gpu> gpus;
  return gpus;
}

struct FabricInfo {  // nvmlGpuFabricInfo_t
  std::array<unsigned char, 16> cluster_uuid;
  int status;
  unsigned int clique_id;
  unsigned char state;
};

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// Reads the file again; false when it cannot be read.
bool Load() {
  const char* path = std::getenv("COHORT_NVML_STANDIN");
  if (path == nullptr) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::vector<Gpu> gpus;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string uuid;
    Gpu gpu;
    if (!(words >> uuid >> gpu.clique)) continue;
    words >> gpu.util >> gpu.mem_mib;
    gpu.registered = uuid.size() == 32;
    for (std::size_t i = 0; gpu.registered && i < 16; ++i) {
      gpu.uuid[i] = static_cast<unsigned char>(std::stoul(uuid.substr(2 * i, 2), nullptr, 16));
    }
    gpus.push_back(gpu);
  }
  // Handles point into the list: after nvmlInit_v2 it keeps its place and
  // size, and only the values change.
  if (Gpus().empty()) {
    Gpus() = gpus;
  } else {
    for (std::size_t i = 0; i < Gpus().size() && i < gpus.size(); ++i) Gpus()[i] = gpus[i];
  }
  return true;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  Gpus().clear();
  return Load() ? 0 : 9;  // NVML_ERROR_DRIVER_NOT_LOADED
}

int nvmlShutdown() { return 0; }

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(Gpus().size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= Gpus().size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &Gpus()[index];
  return 0;
}

int nvmlDeviceGetGpuFabricInfo(void* device, FabricInfo* info) {
  const Gpu& gpu = *static_cast<const Gpu*>(device);
  info->cluster_uuid = gpu.uuid;
  info->status = 0;
  info->clique_id = gpu.clique;
  info->state = gpu.registered ? 3 : 1;  // COMPLETED, NOT_STARTED
  return 0;
}

int nvmlDeviceGetUtilizationRates(void* device, Utilization* utilization) {
  const auto index = static_cast<std::size_t>(static_cast<Gpu*>(device) - Gpus().data());
  Load();
  utilization->gpu = Gpus()[index].util;
  utilization->memory = 0;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  const auto index = static_cast<std::size_t>(static_cast<Gpu*>(device) - Gpus().data());
  Load();
  constexpr unsigned long long kMiB = 1ULL << 20;
  memory->used = Gpus()[index].mem_mib * kMiB;
  memory->total = 80ULL << 30;
  memory->free = memory->total - memory->used;
  return 0;
}

}  // extern "C"
