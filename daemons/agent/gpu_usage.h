// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nvml_library.h"

/// How busy this node's GPUs are, as NVIDIA's driver says (NVML), for the
/// samples of what launches use (sstat, TRESUsageIn's gres/gpuutil and
/// gres/gpumem).
namespace cohort::agent {

/// One GPU's state at a sample.
struct GpuReading {
  int util_pct = -1;             ///< utilization.gpu over the driver's last period; -1: unknown
  std::int64_t mem_used_mb = 0;  ///< memory in use on it (MiB)
};

/// NVML kept open between samples (nvmlInit once, as Slurm's gpu/nvml
/// plugin does). Loop thread only.
class GpuUsageReader {
 public:
  /// Loads `library` and starts NVML; NotFound without the library (no
  /// NVIDIA driver), FailedPrecondition when it lacks the calls or fails to
  /// start. The agent then samples no GPUs.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GpuUsageReader>> Open(
      const std::string& library);
  ~GpuUsageReader();
  GpuUsageReader(const GpuUsageReader&) = delete;
  GpuUsageReader& operator=(const GpuUsageReader&) = delete;

  /// Every GPU's reading by NVML index (nvidia-smi's numbering, the agent's
  /// GPU indices), at most nvml::kMaxGpus; a GPU NVML cannot read has an
  /// unknown utilization. Empty when NVML cannot count them.
  [[nodiscard]] std::vector<GpuReading> Read() const;

 private:
  struct Calls;
  GpuUsageReader(nvml::Library library, std::unique_ptr<Calls> calls);

  nvml::Library library_;
  std::unique_ptr<Calls> calls_;
};

}  // namespace cohort::agent
