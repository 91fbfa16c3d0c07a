// SPDX-License-Identifier: Apache-2.0
#include "launch_isolation.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

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
    if (gpu.amd) {
      // /dev/kfd is every AMD GPU's: the render node tells them apart.
      files.push_back(gpu.render_node.empty() ? fmt::format("/dev/dri/renderD{}", 128 + gpu.index)
                                              : "/dev/dri/" + gpu.render_node);
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

std::optional<int> CharDeviceMajor(std::string_view proc_devices, std::string_view name) {
  bool character = false;
  std::size_t start = 0;
  while (start < proc_devices.size()) {
    const std::size_t end = std::min(proc_devices.find('\n', start), proc_devices.size());
    std::string_view line = proc_devices.substr(start, end - start);
    start = end + 1;
    if (line.starts_with("Character devices:")) {
      character = true;
      continue;
    }
    if (line.starts_with("Block devices:")) character = false;
    if (!character) continue;
    while (line.starts_with(' ')) line.remove_prefix(1);
    int major = -1;
    const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), major);
    if (error != std::errc()) continue;
    std::string_view device = line.substr(static_cast<std::size_t>(rest - line.data()));
    while (device.starts_with(' ')) device.remove_prefix(1);
    if (device == name) return major;
  }
  return std::nullopt;
}

ImexAccess ImexChannelAccess(const std::string& dir, int major, int channel) {
  ImexAccess access;
  access.file = fmt::format("{}/channel{}", dir, channel);
  struct stat info {};
  if (::stat(access.file.c_str(), &info) != 0 || !S_ISCHR(info.st_mode)) {
    if (major < 0) {
      std::ifstream in("/proc/devices");
      std::stringstream text;
      text << in.rdbuf();
      major = CharDeviceMajor(text.str(), "nvidia-caps-imex-channels").value_or(-1);
    }
    ::mkdir(dir.c_str(), 0755);
    if (major < 0) {
      access.problem = fmt::format(
          "{} is missing and the IMEX channels' major is unknown (no nvidia-caps-imex-channels "
          "in /proc/devices; set SwitchParameters=imex_dev_major=)",
          access.file);
    } else if (::mknod(access.file.c_str(), S_IFCHR | 0666,
                       makedev(static_cast<unsigned>(major), static_cast<unsigned>(channel))) !=
                   0 &&
               errno != EEXIST) {
      access.problem =
          fmt::format("{} is missing and could not be made: {}", access.file, std::strerror(errno));
    }
  }
  // Every other channel's file is denied; at most the configured count are
  // looked at (imex_channel_count bounds the names).
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const int number = NumberAfter(name, "channel");
    if (number < 0 || number == channel) continue;
    struct stat other {};
    if (::stat(entry.path().c_str(), &other) == 0 && S_ISCHR(other.st_mode)) {
      access.denied.push_back(other.st_rdev);
    }
    if (access.denied.size() >= 65536) break;
  }
  std::ranges::sort(access.denied);
  return access;
}

std::vector<int> AdoptedCpus(const std::string& folder) {
  std::ifstream in(folder + "/launch.json");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<step::LaunchFile> file = step::ParseLaunchFile(text.str());
  return file.ok() ? file->cpus : std::vector<int>{};
}

}  // namespace cohort::agent
