// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/launch/node_layout.h"

/// What keeps one job's launches off another's GPUs on a node: the device
/// rules of the GPUs a launch was not granted, which its cgroup denies
/// (step/job_cgroup.h). The cores each launch holds are binding::GrantCpus'.
namespace cohort::agent {

/// The device file of each GPU of `layout`, by index: the file hwloc found
/// it by (`/dev/nvidia3`), `/dev/nvidiaN` for one found as nvmlN or cudaN,
/// an AMD GPU's DRM render node (`/dev/dri/renderD128`, else
/// renderD<128+index>), else `/dev/nvidia<index>`. What GpuFiles= of the
/// node's line replaces.
/// Pure.
[[nodiscard]] std::vector<std::string> DefaultGpuFiles(const layout::NodeLayout& layout);

/// The device number (st_rdev) of each file, in order; nullopt for a file
/// that is missing or no character device, which there is nothing to deny
/// of. Reads the files' metadata: call at startup.
[[nodiscard]] std::vector<std::optional<dev_t>> GpuDevices(std::span<const std::string> files);

/// The devices of the GPUs not in `granted` (bit i: GPU index i), without
/// unknown ones and without one that a granted GPU shares. Pure.
[[nodiscard]] std::vector<dev_t> DeniedGpus(std::span<const std::optional<dev_t>> devices,
                                            std::uint64_t granted);

/// What a launch given IMEX channel `channel` may open (SwitchType=
/// switch/nvidia_imex): `file`, `dir`/channelN, made when missing and the
/// major is known (`major`, else /proc/devices' nvidia-caps-imex-channels);
/// and the other channels' device files in `dir`, which its cgroup denies.
struct ImexAccess {
  std::string file;
  std::vector<dev_t> denied;
  std::string problem;  ///< why `file` is missing, for the log; empty when it is there
};
[[nodiscard]] ImexAccess ImexChannelAccess(const std::string& dir, int major, int channel);

/// The major of the character device `name` in /proc/devices' text; nullopt
/// when it is not listed. Pure.
[[nodiscard]] std::optional<int> CharDeviceMajor(std::string_view proc_devices,
                                                 std::string_view name);

/// The PUs an earlier agent's launch in `folder` holds, from its
/// launch.json; empty when it names none or cannot be read.
[[nodiscard]] std::vector<int> AdoptedCpus(const std::string& folder);

}  // namespace cohort::agent
