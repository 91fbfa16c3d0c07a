// SPDX-License-Identifier: Apache-2.0
#include "launch_isolation.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

#include "launch_file.h"

namespace cohort::agent {
namespace {

// N of a GPU found as `prefix`N; -1 for any other name.
int NumberAfter(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return -1;
  const std::string_view digits = name.substr(prefix.size());
  int number = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  return error == std::errc() && end == digits.data() + digits.size() ? number : -1;
}

}  // namespace

std::vector<std::string> DefaultGpuFiles(const layout::NodeLayout& layout) {
  std::vector<std::string> files;
  for (const layout::Gpu& gpu : layout.gpus) {
    if (gpu.name.starts_with("/dev/")) {
      files.push_back(gpu.name);
      continue;
    }
    int number = NumberAfter(gpu.name, "nvml");
    if (number < 0) number = NumberAfter(gpu.name, "cuda");
    files.push_back(fmt::format("/dev/nvidia{}", number < 0 ? gpu.index : number));
  }
  return files;
}

std::vector<std::optional<dev_t>> GpuDevices(std::span<const std::string> files) {
  std::vector<std::optional<dev_t>> devices;
  for (const std::string& file : files) {
    struct stat info {};
    const bool device = ::stat(file.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
    devices.push_back(device ? std::optional<dev_t>(info.st_rdev) : std::nullopt);
  }
  return devices;
}

std::vector<dev_t> DeniedGpus(std::span<const std::optional<dev_t>> devices,
                              std::uint64_t granted) {
  std::vector<dev_t> allowed;
  std::vector<dev_t> denied;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i]) continue;
    const bool mine = i < 64 && ((granted >> i) & 1) != 0;
    (mine ? allowed : denied).push_back(*devices[i]);
  }
  std::erase_if(denied,
                [&](dev_t device) { return std::ranges::find(allowed, device) != allowed.end(); });
  std::ranges::sort(denied);
  denied.erase(std::unique(denied.begin(), denied.end()), denied.end());
  return denied;
}

std::vector<int> AdoptedCpus(const std::string& folder) {
  std::ifstream in(folder + "/launch.json");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<step::LaunchFile> file = step::ParseLaunchFile(text.str());
  return file.ok() ? file->cpus : std::vector<int>{};
}

}  // namespace cohort::agent
