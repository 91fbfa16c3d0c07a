// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

/// What one node is made of: its NUMA nodes with their memory and cores, its
/// GPUs and InfiniBand/RoCE adapters with the NUMA node each hangs off. The
/// agent fills it from hwloc (daemons/agent/hwloc_layout.h); the core plans
/// rank bindings from it (cohort/binding.h). Plain data: no hwloc types.
namespace cohort::layout {

/// One physical core: the OS indices of its hardware threads (PUs),
/// ascending. A machine without core information has one PU per core.
struct Core {
  std::vector<int> pus;

  friend bool operator==(const Core&, const Core&) = default;
};

struct NumaNode {
  int os_index = 0;
  std::int64_t memory_mb = 0;
  /// In hwloc's logical order, so that neighbouring cores (which share
  /// caches) stay together. Empty for a memory-only node (HBM, CXL, a GPU's
  /// memory exposed as NUMA).
  std::vector<Core> cores;
};

struct Gpu {
  int index = 0;           ///< the node's GPU number, 0..n-1: grants and
                           ///< CUDA_VISIBLE_DEVICES use it
  std::string name;        ///< where it was found: nvml3, cuda3, /dev/nvidia3, or "config"
  std::string pci_bus_id;  ///< 0000:1b:00.0; empty when unknown
  int numa = -1;           ///< OS index of its NUMA node; -1 when unknown
  std::string model{};  ///< as hwloc's GPUModel says: "NVIDIA H100 80GB HBM3"; empty when unknown
  /// AMD's (found through ROCm SMI, hwloc's RSMI devices): its device file is
  /// a DRM render node, and ranks see it through ROCR_VISIBLE_DEVICES.
  bool amd = false;
  std::string render_node{};  ///< an AMD GPU's DRM render node: renderD128; empty when unknown
  /// Its rail: the adapters that share its PCIe switch (nearest in the PCIe
  /// tree, not only its NUMA node), as NCCL_IB_HCA should name them; empty
  /// when none is closer than the host bridge's.
  std::vector<std::string> nics{};
};

/// An InfiniBand or RoCE adapter (an hwloc OpenFabrics device).
struct Nic {
  std::string name;  ///< as NCCL_IB_HCA names it: mlx5_0
  int numa = -1;     ///< OS index of its NUMA node; -1 when unknown
};

struct NodeLayout {
  int sockets = 1;
  std::vector<NumaNode> numa_nodes;  ///< ascending os_index
  /// Online cores whose NUMA node the OS does not list (offline memory);
  /// counted as CPUs of the node but never bound to.
  std::vector<Core> cores_without_numa;
  std::vector<Gpu> gpus;  ///< ascending index; indices are 0..n-1
  std::vector<Nic> nics;  ///< in natural name order (mlx5_2 before mlx5_10)

  /// Hardware threads of the node, the CPUs Slurm and cohort.conf count.
  [[nodiscard]] int PuCount() const;
  [[nodiscard]] int CoreCount() const;
  /// The most hardware threads of any core; 1 for a node without cores.
  [[nodiscard]] int ThreadsPerCore() const;
  [[nodiscard]] std::int64_t MemoryMb() const;
  /// The NUMA node with this OS index; null when there is none.
  [[nodiscard]] const NumaNode* FindNuma(int os_index) const;
};

/// The scheduler's GPU locality groups: for each NUMA node that has GPUs, the
/// mask of their indices (ascending by NUMA node), and one more group for the
/// GPUs of unknown locality. Empty when no GPU's NUMA node is known, or the
/// node has more than 64 GPUs: the scheduler then treats all GPUs as one group.
[[nodiscard]] std::vector<std::uint64_t> GpuGroups(const NodeLayout& layout);

/// `count` GPUs known only from a NodeName line: named "config", the i-th on
/// NUMA node `numa[i]` (-1 when `numa` is shorter).
[[nodiscard]] std::vector<Gpu> ConfiguredGpus(int count, std::span<const int> numa);

/// The layout of a node known only by its NodeName line (emulated nodes, the
/// controller's checks at submit): `cpus` single-thread cores and
/// `memory_mb` split evenly over NUMA nodes 0..k-1, where k is one more than
/// the highest of `gpu_numa` (1 without it), GPUs from ConfiguredGpus (on
/// NUMA node 0 when `gpu_numa` is empty), one socket per NUMA node, no NICs.
[[nodiscard]] NodeLayout ApproximateLayout(int cpus, std::int64_t memory_mb, int gpus,
                                           std::span<const int> gpu_numa);

/// The node as a cohort.conf line, in the manner of `slurmd -C`:
/// `NodeName=gpu001 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2
/// MemoryMB=2063937 Gres=gpu:h100:8 GpuNuma=0,0,0,0,1,1,1,1`. The GPUs are
/// `Gres=gpu:TYPE:N` when hwloc gave every GPU's model and they are of one
/// type (GpuTypeOf), else `Gpus=N`; left out without GPUs. `GpuNuma=` is
/// left out unless every GPU's NUMA node is known.
[[nodiscard]] std::string FormatNodeLine(std::string_view name, const NodeLayout& layout);

/// The type a GPU model goes by in `Gres=gpu:TYPE:N` and `--gres`, as
/// Slurm's sites name them: the model's first word after the vendor's and
/// the product line's, to its first `-`, in lower case ("NVIDIA H100 80GB
/// HBM3" is h100, "Tesla V100-SXM2-16GB" v100, "AMD Instinct MI250X"
/// mi250x, "NVIDIA GeForce RTX 4090" rtx4090). Empty for an empty model.
[[nodiscard]] std::string GpuTypeOf(std::string_view model);

/// A readable summary, one line per NUMA node, GPU and NIC, for
/// `cohort-agent --print-node`. Ends with a newline.
[[nodiscard]] std::string DescribeLayout(const NodeLayout& layout);

/// A CPU list in the kernel's cpulist form: `0-13,112-125`.
[[nodiscard]] std::string FormatCpuList(std::span<const int> cpus);

}  // namespace cohort::layout
