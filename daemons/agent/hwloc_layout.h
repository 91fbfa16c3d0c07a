// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "cohort/launch/node_layout.h"

/// Node discovery with hwloc: NUMA nodes and their memory, cores and their
/// hardware threads, GPUs and InfiniBand/RoCE adapters with their NUMA nodes.
///
/// GPUs are, in this order of preference: hwloc's NVML devices (nvml0…),
/// its CUDA devices (cuda0…), NVIDIA display-class PCI devices in bus order
/// (the order nvidia-smi numbers them; Debian's hwloc has no NVML plugin).
/// A GPU's NUMA node is the one whose CPUs its PCI root attaches to; -1 when
/// it attaches to the whole machine. NICs are hwloc's OpenFabrics devices.
namespace cohort::agent {

/// Reads a topology that hwloc saved (`lstopo-no-graphics --of xml`, hwloc v2
/// format). For tests and emulation (`--hwloc-xml`). Returns NotFound when
/// the file does not exist, InvalidArgument when hwloc cannot read it.
[[nodiscard]] absl::StatusOr<layout::NodeLayout> LoadLayoutFromXml(const std::string& path);

/// Discovers this machine (the CPUs and memory this process may use, as
/// cgroups allow). Without a GPU that hwloc sees, counts /dev/nvidia<N> as
/// GPUs of unknown locality. Reads /sys, /proc and /dev: call at startup, not
/// on the loop. Returns Internal when hwloc fails. With `xml`, also hwloc's
/// XML of the machine (empty when hwloc cannot write it), which the node's
/// stepds hand to a PMIx step's server so that it need not discover the
/// machine again.
[[nodiscard]] absl::StatusOr<layout::NodeLayout> DiscoverHostLayout(std::string* xml = nullptr);

}  // namespace cohort::agent
