// SPDX-License-Identifier: Apache-2.0
// A stand-in for NVIDIA's libnvidia-ml.so.1 that answers the NVML calls the
// agent makes for NVLink fabric information with recorded values, for tests
// on machines without NVIDIA's driver. COHORT_NVML_STANDIN names a file of
// one line per GPU: its fabric's cluster UUID (32 hex digits) and clique id,
// or "-" for a GPU whose fabric registration has not completed. Without
// the variable (or with an unreadable file) nvmlInit_v2 fails.
#include <array>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Gpu {
  std::array<unsigned char, 16> uuid{};
  unsigned clique = 0;
  bool registered = false;
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

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* path = std::getenv("COHORT_NVML_STANDIN");
  if (path == nullptr) return 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  std::ifstream in(path);
  if (!in) return 9;
  Gpus().clear();
  std::string uuid;
  unsigned clique = 0;
  while (in >> uuid >> clique) {
    Gpu& gpu = Gpus().emplace_back();
    gpu.clique = clique;
    gpu.registered = uuid.size() == 32;
    for (std::size_t i = 0; gpu.registered && i < 16; ++i) {
      gpu.uuid[i] = static_cast<unsigned char>(std::stoul(uuid.substr(2 * i, 2), nullptr, 16));
    }
  }
  return 0;
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

}  // extern "C"
