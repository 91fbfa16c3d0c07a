// SPDX-License-Identifier: Apache-2.0
#include "hwloc_layout.h"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "host_resources.h"

namespace cohort::agent {
namespace {

using layout::Core;
using layout::Gpu;
using layout::NodeLayout;
using layout::NumaNode;

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string_view Text(const char* text) { return text == nullptr ? std::string_view() : text; }

// The number that ends a device name (nvml12 -> 12, mlx5_3 -> 3); -1 without.
int TrailingNumber(std::string_view name) {
  std::size_t start = name.size();
  while (start > 0 && name[start - 1] >= '0' && name[start - 1] <= '9') --start;
  if (start == name.size() || name.size() - start > 6) return -1;
  int n = 0;
  for (const char c : name.substr(start)) n = n * 10 + (c - '0');
  return n;
}

// mlx5_2 before mlx5_10.
bool NaturalLess(std::string_view a, std::string_view b) {
  const int na = TrailingNumber(a);
  const int nb = TrailingNumber(b);
  const std::string_view pa = na < 0 ? a : a.substr(0, a.find_last_not_of("0123456789") + 1);
  const std::string_view pb = nb < 0 ? b : b.substr(0, b.find_last_not_of("0123456789") + 1);
  if (pa != pb) return pa < pb;
  return na != nb ? na < nb : a < b;
}

// The OS device kind without reading an enum value hwloc may not know:
// XML from hwloc 3 holds osdev_type bit masks that 2.x stores as they are.
bool IsOpenFabrics(hwloc_obj_t osdev) {
  if (Text(osdev->subtype) == "OpenFabrics") return true;
  int raw = -1;
  static_assert(sizeof(osdev->attr->osdev.type) == sizeof(int));
  std::memcpy(&raw, &osdev->attr->osdev.type, sizeof raw);
  return raw == static_cast<int>(HWLOC_OBJ_OSDEV_OPENFABRICS);
}

enum class GpuFamily { kNone, kNvml, kCuda, kRsmi };

GpuFamily FamilyOf(hwloc_obj_t osdev) {
  std::string_view kind = Text(osdev->subtype);
  if (kind.empty()) kind = Text(hwloc_obj_get_info_by_name(osdev, "Backend"));
  const std::string_view name = Text(osdev->name);
  if (kind == "NVML" || (kind.empty() && name.starts_with("nvml"))) return GpuFamily::kNvml;
  if (kind == "CUDA" || (kind.empty() && name.starts_with("cuda"))) return GpuFamily::kCuda;
  if (kind == "RSMI" || (kind.empty() && name.starts_with("rsmi"))) return GpuFamily::kRsmi;
  return GpuFamily::kNone;
}

// The DRM render node hwloc's Linux backend found beside `osdev`, under the
// same PCI device ("renderD128"); empty when none.
std::string RenderNodeBeside(hwloc_obj_t osdev) {
  const hwloc_obj_t pci = osdev->parent;
  if (pci == nullptr) return {};
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type == HWLOC_OBJ_OS_DEVICE && Text(child->name).starts_with("renderD")) {
      return std::string(Text(child->name));
    }
  }
  return {};
}

std::string PciBusId(hwloc_obj_t pci) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", static_cast<unsigned>(pci->attr->pcidev.domain),
                     pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

// The PCI device an OS device belongs to, or null.
hwloc_obj_t PciDeviceOf(hwloc_obj_t obj) {
  for (; obj != nullptr; obj = obj->parent) {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) return obj;
    if (obj->type != HWLOC_OBJ_OS_DEVICE) return nullptr;
  }
  return nullptr;
}

class LayoutReader {
 public:
  explicit LayoutReader(hwloc_topology_t topology) : topology_(topology) {}

  NodeLayout Read() {
    layout_.sockets = std::max(1, hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_PACKAGE));
    ReadNumaAndCores();
    ReadGpus();
    ReadNics();
    FindRails();
    return std::move(layout_);
  }

 private:
  void ReadNumaAndCores() {
    std::vector<hwloc_obj_t> numa_objects;
    for (hwloc_obj_t numa = nullptr;
         (numa = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_NUMANODE, numa)) != nullptr;) {
      numa_objects.push_back(numa);
    }
    std::sort(numa_objects.begin(), numa_objects.end(),
              [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });
    for (hwloc_obj_t numa : numa_objects) {
      layout_.numa_nodes.push_back(
          {.os_index = static_cast<int>(numa->os_index),
           .memory_mb = static_cast<std::int64_t>(numa->attr->numanode.local_memory >> 20),
           .cores = {}});
    }
    // PUs in logical order; a PU without a Core object above it is a core.
    std::map<hwloc_obj_t, std::pair<std::size_t, std::size_t>> placed;  // core -> (numa, index)
    for (hwloc_obj_t pu = nullptr;
         (pu = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_PU, pu)) != nullptr;) {
      hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topology_, HWLOC_OBJ_CORE, pu);
      if (core == nullptr) core = pu;
      const int os_index = static_cast<int>(pu->os_index);
      if (const auto it = placed.find(core); it != placed.end()) {
        CoresOf(it->second.first)[it->second.second].pus.push_back(os_index);
        continue;
      }
      // The lowest NUMA node whose CPUs hold it: DDR before the HBM or CXL
      // node that shares its CPUs (those stay memory-only here).
      std::size_t numa = numa_objects.size();
      for (std::size_t n = 0; n < numa_objects.size(); ++n) {
        if (hwloc_bitmap_isset(numa_objects[n]->cpuset, pu->os_index) != 0) {
          numa = n;
          break;
        }
      }
      std::vector<Core>& cores = CoresOf(numa);
      placed.emplace(core, std::pair{numa, cores.size()});
      cores.push_back(Core{{os_index}});
    }
    for (NumaNode& node : layout_.numa_nodes) {
      for (Core& core : node.cores) std::sort(core.pus.begin(), core.pus.end());
    }
    for (Core& core : layout_.cores_without_numa) std::sort(core.pus.begin(), core.pus.end());
  }

  std::vector<Core>& CoresOf(std::size_t numa) {
    return numa < layout_.numa_nodes.size() ? layout_.numa_nodes[numa].cores
                                            : layout_.cores_without_numa;
  }

  // The NUMA node (OS index) of an I/O object: the one with cores under its
  // closest non-I/O ancestor; -1 when that is the whole machine and it has
  // several, or none.
  int NumaOf(hwloc_obj_t io) const {
    hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology_, io);
    if (ancestor == nullptr || ancestor->cpuset == nullptr) return -1;
    std::vector<int> near;
    for (const NumaNode& node : layout_.numa_nodes) {
      for (const Core& core : node.cores) {
        if (hwloc_bitmap_isset(ancestor->cpuset, static_cast<unsigned>(core.pus.front())) != 0) {
          near.push_back(node.os_index);
          break;
        }
      }
    }
    if (near.empty()) return -1;
    if (near.size() > 1 && ancestor->parent == nullptr) return -1;
    return near.front();
  }

  void ReadGpus() {
    std::map<GpuFamily, std::vector<hwloc_obj_t>> found;
    for (hwloc_obj_t osdev = nullptr;
         (osdev = hwloc_get_next_osdev(topology_, osdev)) != nullptr;) {
      const GpuFamily family = FamilyOf(osdev);
      if (family != GpuFamily::kNone) found[family].push_back(osdev);
    }
    for (const GpuFamily family : {GpuFamily::kNvml, GpuFamily::kCuda, GpuFamily::kRsmi}) {
      std::vector<hwloc_obj_t>& devices = found[family];
      if (devices.empty()) continue;
      std::stable_sort(devices.begin(), devices.end(), [](hwloc_obj_t a, hwloc_obj_t b) {
        return TrailingNumber(Text(a->name)) < TrailingNumber(Text(b->name));
      });
      for (hwloc_obj_t osdev : devices) {
        const hwloc_obj_t pci = PciDeviceOf(osdev);
        const bool amd = family == GpuFamily::kRsmi;
        layout_.gpus.push_back(
            {.index = static_cast<int>(layout_.gpus.size()),
             .name = std::string(Text(osdev->name)),
             .pci_bus_id = pci != nullptr ? PciBusId(pci) : std::string(),
             .numa = NumaOf(osdev),
             .model = std::string(Text(hwloc_obj_get_info_by_name(osdev, "GPUModel"))),
             .amd = amd,
             .render_node = amd ? RenderNodeBeside(osdev) : std::string()});
        gpu_pci_.push_back(pci);
      }
      return;
    }
    // No GPU library in hwloc: NVIDIA display and 3D controllers, in bus
    // order (NVSwitches are bridges, class 0x06, and stay out).
    constexpr unsigned kNvidia = 0x10de;
    constexpr unsigned kDisplayClass = 0x03;
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topology_, pci)) != nullptr;) {
      if (pci->attr->pcidev.vendor_id == kNvidia &&
          (pci->attr->pcidev.class_id >> 8) == kDisplayClass) {
        layout_.gpus.push_back(
            {.index = 0, .name = "pci", .pci_bus_id = PciBusId(pci), .numa = NumaOf(pci)});
        gpu_pci_.push_back(pci);
      }
    }
    std::vector<std::size_t> order(layout_.gpus.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return layout_.gpus[a].pci_bus_id < layout_.gpus[b].pci_bus_id;
    });
    std::vector<Gpu> gpus;
    std::vector<hwloc_obj_t> pcis;
    for (const std::size_t i : order) {
      gpus.push_back(std::move(layout_.gpus[i]));
      pcis.push_back(gpu_pci_[i]);
    }
    layout_.gpus = std::move(gpus);
    gpu_pci_ = std::move(pcis);
    for (std::size_t i = 0; i < layout_.gpus.size(); ++i) {
      layout_.gpus[i].index = static_cast<int>(i);
    }
  }

  void ReadNics() {
    for (hwloc_obj_t osdev = nullptr;
         (osdev = hwloc_get_next_osdev(topology_, osdev)) != nullptr;) {
      if (IsOpenFabrics(osdev) && osdev->name != nullptr) {
        layout_.nics.push_back({.name = osdev->name, .numa = NumaOf(osdev)});
        nic_pci_.emplace(osdev->name, PciDeviceOf(osdev));
      }
    }
    std::sort(
        layout_.nics.begin(), layout_.nics.end(),
        [](const layout::Nic& a, const layout::Nic& b) { return NaturalLess(a.name, b.name); });
  }

  // Each GPU's rail: the adapters fewest PCIe hops from it, when the path
  // between them stays below the host bridge (a shared PCIe switch).
  void FindRails() {
    for (std::size_t g = 0; g < layout_.gpus.size() && g < gpu_pci_.size(); ++g) {
      const hwloc_obj_t gpu = gpu_pci_[g];
      if (gpu == nullptr) continue;
      int best = -1;
      for (const layout::Nic& nic : layout_.nics) {
        const hwloc_obj_t pci = nic_pci_[nic.name];
        if (pci == nullptr) continue;
        const hwloc_obj_t common = hwloc_get_common_ancestor_obj(topology_, gpu, pci);
        // A host bridge (depth 0) or anything above it is no switch of theirs.
        if (common == nullptr || common->type != HWLOC_OBJ_BRIDGE ||
            common->attr->bridge.depth == 0) {
          continue;
        }
        int hops = 0;
        for (hwloc_obj_t up = gpu; up != common; up = up->parent) ++hops;
        if (best < 0 || hops < best) {
          best = hops;
          layout_.gpus[g].nics.clear();
        }
        if (hops == best) layout_.gpus[g].nics.push_back(nic.name);
      }
    }
  }

  hwloc_topology_t topology_;
  NodeLayout layout_;
  std::vector<hwloc_obj_t> gpu_pci_;            ///< by GPU index: its PCI device, or null
  std::map<std::string, hwloc_obj_t> nic_pci_;  ///< by adapter name: its PCI device, or null
};

// A topology set up to keep GPUs, NICs and their PCI devices.
absl::StatusOr<Topology> NewTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return absl::InternalError(fmt::format(
        "hwloc cannot start: {}", std::error_code(errno, std::generic_category()).message()));
  }
  Topology topology(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return topology;
}

}  // namespace

absl::StatusOr<NodeLayout> LoadLayoutFromXml(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(
        fmt::format("hwloc topology {}: no such file; save one with "
                    "lstopo-no-graphics --of xml FILE",
                    path));
  }
  absl::StatusOr<Topology> topology = NewTopology();
  if (!topology.ok()) return topology.status();
  if (hwloc_topology_set_xml(topology->get(), path.c_str()) != 0 ||
      hwloc_topology_load(topology->get()) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("hwloc cannot read the topology {}: {}; it must be hwloc v2 XML "
                    "(lstopo-no-graphics "
                    "--of xml FILE)",
                    path, std::error_code(errno, std::generic_category()).message()));
  }
  return LayoutReader(topology->get()).Read();
}

absl::StatusOr<NodeLayout> DiscoverHostLayout(std::string* xml) {
  absl::StatusOr<Topology> topology = NewTopology();
  if (!topology.ok()) return topology.status();
  if (hwloc_topology_load(topology->get()) != 0) {
    return absl::InternalError(
        fmt::format("hwloc cannot discover this machine: {}",
                    std::error_code(errno, std::generic_category()).message()));
  }
  if (xml != nullptr) {
    xml->clear();
    char* buffer = nullptr;
    int length = 0;
    if (hwloc_topology_export_xmlbuffer(topology->get(), &buffer, &length, 0) == 0 &&
        buffer != nullptr) {
      // The length counts the terminating NUL.
      xml->assign(buffer, length > 0 ? static_cast<std::size_t>(length - 1) : 0);
      hwloc_free_xmlbuffer(topology->get(), buffer);
    }
  }
  NodeLayout layout = LayoutReader(topology->get()).Read();
  if (layout.gpus.empty()) {
    for (const int number : NvidiaDeviceNumbers()) {
      layout.gpus.push_back({.index = static_cast<int>(layout.gpus.size()),
                             .name = fmt::format("/dev/nvidia{}", number),
                             .pci_bus_id = {},
                             .numa = -1});
    }
  }
  return layout;
}

}  // namespace cohort::agent
