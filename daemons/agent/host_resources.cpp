// SPDX-License-Identifier: Apache-2.0
#include "host_resources.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace cohort::agent {
namespace {

// /dev/nvidia0, /dev/nvidia1, …: the number, or -1 for any other name.
int NvidiaDeviceNumber(std::string_view name) {
  constexpr std::string_view kPrefix = "nvidia";
  if (name.size() <= kPrefix.size() || !name.starts_with(kPrefix)) return -1;
  const std::string_view digits = name.substr(kPrefix.size());
  int number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (error != std::errc() || end != digits.data() + digits.size()) return -1;
  return number;
}

}  // namespace

std::vector<int> NvidiaDeviceNumbers() {
  std::vector<int> numbers;
  std::error_code error;
  std::filesystem::directory_iterator it("/dev", error);
  if (error) return numbers;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    if (error) break;
    const int number = NvidiaDeviceNumber(it->path().filename().string());
    if (number >= 0) numbers.push_back(number);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

NodeResources ResourcesFromLayout(const layout::NodeLayout& layout) {
  NodeResources resources;
  resources.cpus = std::max(1, layout.PuCount());
  resources.memory_mb = std::max<std::int64_t>(1, layout.MemoryMb());
  resources.gpus = static_cast<int>(layout.gpus.size());
  resources.gpu_groups = layout::GpuGroups(layout);
  return resources;
}

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
  resources.gpus = static_cast<int>(NvidiaDeviceNumbers().size());
  return resources;
}

}  // namespace cohort::agent
