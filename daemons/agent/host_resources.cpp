// SPDX-License-Identifier: Apache-2.0
#include "host_resources.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

namespace cohort::agent {
namespace {

// /dev/nvidia0, /dev/nvidia1, …; not nvidiactl, nvidia-uvm or nvidia-caps.
bool IsGpuDevice(const std::string& name) {
  constexpr std::string_view kPrefix = "nvidia";
  if (name.size() <= kPrefix.size() || !name.starts_with(kPrefix)) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

int CountGpus() {
  std::error_code error;
  std::filesystem::directory_iterator it("/dev", error);
  if (error) return 0;
  int count = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    if (error) break;
    if (IsGpuDevice(it->path().filename().string())) ++count;
  }
  return count;
}

}  // namespace

NodeResources DetectHostResources() {
  NodeResources resources;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0) resources.cpus = static_cast<int>(cpus);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    resources.memory_mb =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(pages) * page_size / (1024 * 1024));
  }
  resources.gpus = CountGpus();
  return resources;
}

}  // namespace cohort::agent
