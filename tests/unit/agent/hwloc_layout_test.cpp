// SPDX-License-Identifier: Apache-2.0
#include "hwloc_layout.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cohort/launch/binding.h"
#include "cohort/launch/node_layout.h"
#include "test_support.h"

namespace cohort::agent {
namespace {

using layout::NodeLayout;
using Ints = std::vector<int>;
using Names = std::vector<std::string>;

// What tests/data/hwloc/README.md and each file say.
struct Expected {
  int numa = 0;
  int pus = 0;
  int cores = 0;
  int threads_per_core = 1;
  int sockets = 1;
  Ints gpu_numa;    // by GPU index
  Names gpu_names;  // empty: not checked
  Names nics;
  Ints nic_numa;
  Ints numa_without_cores;  // memory-only NUMA nodes
  int pus_without_numa = 0;
};

Expected Node(int numa, int pus, int cores, int threads_per_core, int sockets) {
  Expected e;
  e.numa = numa;
  e.pus = pus;
  e.cores = cores;
  e.threads_per_core = threads_per_core;
  e.sockets = sockets;
  return e;
}

Names Numbered(const std::string& prefix, int count) {
  Names names;
  for (int i = 0; i < count; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

const std::map<std::string, Expected>& Expectations() {
  static const std::map<std::string, Expected> expected = [] {
    std::map<std::string, Expected> e;
    Expected& dgx = e["dgx-h100-like.xml"] = Node(2, 224, 112, 2, 2);
    dgx.gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
    dgx.gpu_names = Numbered("nvml", 8);
    dgx.nics = Numbered("mlx5_", 8);
    dgx.nic_numa = {0, 0, 0, 0, 1, 1, 1, 1};
    // CPU set restricted to 4 PUs, 8 GPUs under each socket.
    Expected& dgx2 = e["nvidia-dgx2.xml"] = Node(2, 4, 4, 1, 2);
    dgx2.gpu_numa = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    dgx2.gpu_names = Numbered("nvml", 16);
    Expected& power8 = e["power8-4gpu.xml"] = Node(2, 16, 8, 2, 2);
    power8.gpu_numa = {0, 0, 1, 1};
    power8.gpu_names = Numbered("nvml", 4);
    e["4numa-96pu-pci.xml"] = Node(4, 96, 96, 1, 16);  // its GPU card0 is an ATI display
    // NUMA nodes 4 and 5 have no CPUs; PUs 0-1 and 12-15 have no NUMA node.
    Expected& irregular = e["8numa-16pu-irregular.xml"] = Node(5, 10, 10, 1, 6);
    irregular.numa_without_cores = {4, 5};
    irregular.pus_without_numa = 6;
    // AMD MI300X servers: 8 GPUs through ROCm SMI, an HCA behind each GPU's switch.
    Expected& nps1 = e["mi300x-nps1.xml"] = Node(2, 384, 192, 2, 2);
    nps1.gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
    nps1.gpu_names = Numbered("rsmi", 8);
    nps1.nics = Numbered("mlx5_", 8);
    nps1.nic_numa = {0, 0, 0, 0, 1, 1, 1, 1};
    Expected& nps4 = e["mi300x-nps4.xml"] = Node(8, 384, 192, 2, 2);
    nps4.gpu_numa = {0, 1, 2, 3, 4, 5, 6, 7};
    nps4.gpu_names = Numbered("rsmi", 8);
    nps4.nics = Numbered("mlx5_", 8);
    nps4.nic_numa = {0, 1, 2, 3, 4, 5, 6, 7};
    return e;
  }();
  return expected;
}

std::vector<std::filesystem::path> TopologyFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(testing::DataPath("hwloc"))) {
    if (entry.path().extension() == ".xml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

NodeLayout MustLoad(const std::string& path) {
  absl::StatusOr<NodeLayout> layout = LoadLayoutFromXml(path);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.ok() ? *std::move(layout) : NodeLayout{};
}

void ExpectMatches(const NodeLayout& layout, const Expected& want) {
  EXPECT_EQ(static_cast<int>(layout.numa_nodes.size()), want.numa);
  EXPECT_EQ(layout.PuCount(), want.pus);
  EXPECT_EQ(layout.CoreCount(), want.cores);
  EXPECT_EQ(layout.ThreadsPerCore(), want.threads_per_core);
  EXPECT_EQ(layout.sockets, want.sockets);
  Ints gpu_numa;
  Names gpu_names;
  for (std::size_t i = 0; i < layout.gpus.size(); ++i) {
    EXPECT_EQ(layout.gpus[i].index, static_cast<int>(i));
    gpu_numa.push_back(layout.gpus[i].numa);
    gpu_names.push_back(layout.gpus[i].name);
    EXPECT_FALSE(layout.gpus[i].pci_bus_id.empty()) << layout.gpus[i].name;
  }
  EXPECT_EQ(gpu_numa, want.gpu_numa);
  if (!want.gpu_names.empty()) {
    EXPECT_EQ(gpu_names, want.gpu_names);
  }
  Names nics;
  Ints nic_numa;
  for (const layout::Nic& nic : layout.nics) {
    nics.push_back(nic.name);
    nic_numa.push_back(nic.numa);
  }
  EXPECT_EQ(nics, want.nics);
  EXPECT_EQ(nic_numa, want.nic_numa);
  Ints without_cores;
  std::set<int> pus;
  for (const layout::NumaNode& node : layout.numa_nodes) {
    EXPECT_GT(node.memory_mb, 0) << "NUMA node " << node.os_index;
    if (node.cores.empty()) without_cores.push_back(node.os_index);
    for (const layout::Core& core : node.cores) {
      EXPECT_FALSE(core.pus.empty());
      EXPECT_TRUE(std::is_sorted(core.pus.begin(), core.pus.end()));
      for (const int pu : core.pus) EXPECT_TRUE(pus.insert(pu).second) << "PU " << pu << " twice";
    }
  }
  EXPECT_EQ(without_cores, want.numa_without_cores);
  int without_numa = 0;
  for (const layout::Core& core : layout.cores_without_numa) {
    without_numa += static_cast<int>(core.pus.size());
  }
  EXPECT_EQ(without_numa, want.pus_without_numa);
}

// The NUMA node of each bound PU, and each core by its PUs.
struct PuIndex {
  std::map<int, int> numa;
  std::map<int, const layout::Core*> core;
};

PuIndex IndexPus(const NodeLayout& layout) {
  PuIndex index;
  for (const layout::NumaNode& node : layout.numa_nodes) {
    for (const layout::Core& core : node.cores) {
      for (const int pu : core.pus) {
        index.numa[pu] = node.os_index;
        index.core[pu] = &core;
      }
    }
  }
  return index;
}

// Every rank's CPUs are on its GPU's NUMA node, no CPU goes to two ranks,
// and no rank gets a lone hardware thread while some core is unused.
void ExpectPlanInvariants(const NodeLayout& layout, const std::vector<binding::RankBinding>& plan,
                          const std::string& file) {
  const PuIndex index = IndexPus(layout);
  std::set<int> used;
  bool split_core = false;
  for (const binding::RankBinding& rank : plan) {
    SCOPED_TRACE(file + " rank " + std::to_string(rank.local_rank));
    EXPECT_FALSE(rank.cpus.empty());
    EXPECT_EQ(rank.mem_numa, rank.numa_nodes);
    for (const int gpu : rank.gpus) {
      const int numa = layout.gpus[static_cast<std::size_t>(gpu)].numa;
      if (numa >= 0) {
        EXPECT_EQ(rank.numa_nodes, Ints{numa});
      }
    }
    std::set<const layout::Core*> touched;
    for (const int pu : rank.cpus) {
      ASSERT_TRUE(index.numa.contains(pu)) << "PU " << pu << " is not on a NUMA node";
      EXPECT_TRUE(std::find(rank.numa_nodes.begin(), rank.numa_nodes.end(), index.numa.at(pu)) !=
                  rank.numa_nodes.end())
          << "PU " << pu;
      EXPECT_TRUE(used.insert(pu).second) << "PU " << pu << " given to two ranks";
      touched.insert(index.core.at(pu));
    }
    for (const layout::Core* core : touched) {
      const bool whole = std::all_of(core->pus.begin(), core->pus.end(), [&](int pu) {
        return std::find(rank.cpus.begin(), rank.cpus.end(), pu) != rank.cpus.end();
      });
      split_core |= !whole;
    }
    if (!layout.nics.empty()) {
      EXPECT_FALSE(rank.nccl_ib_hca.empty());
    }
  }
  if (split_core) {
    // Threads were split: only allowed once the ranks' NUMA node has no
    // core left unused.
    for (const binding::RankBinding& rank : plan) {
      for (const int numa : rank.numa_nodes) {
        for (const layout::Core& core : layout.FindNuma(numa)->cores) {
          EXPECT_TRUE(used.contains(core.pus.front()))
              << file << ": a core of NUMA node " << numa << " is unused while threads are split";
        }
      }
    }
  }
}

// Every hardware thread count per NUMA node, to know when a plan must fail.
bool FitsOneRankPerGpu(const NodeLayout& layout) {
  std::map<int, int> ranks;
  for (const layout::Gpu& gpu : layout.gpus) ++ranks[gpu.numa];
  for (const auto& [numa, count] : ranks) {
    const layout::NumaNode* node = layout.FindNuma(numa);
    if (node == nullptr) continue;
    int pus = 0;
    for (const layout::Core& core : node->cores) pus += static_cast<int>(core.pus.size());
    if (count > pus) return false;
  }
  return true;
}

TEST(HwlocLayoutTest, EveryTopologyFileHasExpectations) {
  const std::vector<std::filesystem::path> files = TopologyFiles();
  EXPECT_EQ(files.size(), Expectations().size());
  for (const std::filesystem::path& file : files) {
    EXPECT_TRUE(Expectations().contains(file.filename().string()))
        << file
        << " is new: add what tests/data/hwloc/README.md says of it to "
           "Expectations()";
  }
}

TEST(HwlocLayoutTest, ReadsEveryTopologyFile) {
  for (const std::filesystem::path& file : TopologyFiles()) {
    SCOPED_TRACE(file.filename().string());
    const auto want = Expectations().find(file.filename().string());
    if (want == Expectations().end()) continue;  // reported by the test above
    ExpectMatches(MustLoad(file.string()), want->second);
  }
}

TEST(HwlocLayoutTest, PlansOneRankPerGpuOnEveryTopologyFile) {
  for (const std::filesystem::path& file : TopologyFiles()) {
    const std::string name = file.filename().string();
    SCOPED_TRACE(name);
    const NodeLayout layout = MustLoad(file.string());
    binding::BindingRequest request;
    if (layout.gpus.empty()) {
      // No GPU: one rank per NUMA node with cores, spread round-robin.
      request.ranks = 0;
      for (const layout::NumaNode& node : layout.numa_nodes) request.ranks += !node.cores.empty();
    } else {
      request.ranks = static_cast<int>(layout.gpus.size());
      request.gpus = layout.gpus.size() == 64 ? ~std::uint64_t{0}
                                              : (std::uint64_t{1} << layout.gpus.size()) - 1;
    }
    absl::StatusOr<std::vector<binding::RankBinding>> plan = binding::PlanBinding(layout, request);
    if (!FitsOneRankPerGpu(layout)) {
      // The DGX-2 file keeps 2 PUs per NUMA node for 8 GPUs each.
      EXPECT_FALSE(plan.ok());
      EXPECT_NE(plan.status().message().find("ranks share NUMA node"), std::string_view::npos)
          << plan.status();
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(static_cast<int>(plan->size()), request.ranks);
    ExpectPlanInvariants(layout, *plan, name);
    if (layout.gpus.empty()) {
      std::set<int> numa;
      for (const binding::RankBinding& rank : *plan) numa.insert(rank.numa_nodes.front());
      EXPECT_EQ(static_cast<int>(numa.size()), request.ranks) << "one rank per NUMA node";
    }
  }
}

// Each GPU shares a PCIe switch with one HCA: its rail. A rank gets its
// GPU's HCA, not the four of its NUMA node.
TEST(HwlocLayoutTest, DgxH100RanksGetFourteenCoresAndTheirRailNic) {
  const NodeLayout layout = MustLoad(testing::DataPath("hwloc/dgx-h100-like.xml"));
  for (const layout::Gpu& gpu : layout.gpus) {
    EXPECT_EQ(gpu.nics, Names{fmt::format("mlx5_{}", gpu.index)}) << gpu.name;
  }
  absl::StatusOr<std::vector<binding::RankBinding>> plan =
      binding::PlanBinding(layout, {.gpus = 0xff, .ranks = 8, .cpus_per_task = 28, .options = {}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const binding::RankBinding& rank : *plan) {
    EXPECT_EQ(rank.cpus.size(), 28U) << "56 cores x 2 threads for 4 ranks";
    ASSERT_EQ(rank.gpus.size(), 1U);
    EXPECT_EQ(rank.nccl_ib_hca, fmt::format("=mlx5_{}", rank.gpus.front()));
  }
  // Two GPUs per rank: both rails.
  const absl::StatusOr<std::vector<binding::RankBinding>> pairs =
      binding::PlanBinding(layout, {.gpus = 0xff, .ranks = 4, .cpus_per_task = 56, .options = {}});
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].nccl_ib_hca, "=mlx5_0,mlx5_1");
  EXPECT_EQ(layout::FormatCpuList((*plan)[0].cpus), "0-27");
  EXPECT_EQ(layout::FormatNodeLine("dgx", layout),
            "NodeName=dgx CPUs=224 Sockets=2 CoresPerSocket=56 "
            "ThreadsPerCore=2 MemoryMB=2097152 "
            "Gres=gpu:h100:8 GpuNuma=0,0,0,0,1,1,1,1");
  EXPECT_EQ(layout.gpus[0].pci_bus_id, "0000:18:00.0");
}

// An MI300X node: AMD GPUs found through ROCm SMI, each with its render
// node and its rail HCA; in NPS4 a rank's cores and memory are its GPU's
// quarter of the socket.
TEST(HwlocLayoutTest, Mi300xGpusAreAmdWithRenderNodesAndRails) {
  for (const std::string name : {"mi300x-nps1.xml", "mi300x-nps4.xml"}) {
    SCOPED_TRACE(name);
    const NodeLayout layout = MustLoad(testing::DataPath("hwloc/" + name));
    ASSERT_EQ(layout.gpus.size(), 8U);
    for (const layout::Gpu& gpu : layout.gpus) {
      EXPECT_TRUE(gpu.amd) << gpu.name;
      EXPECT_EQ(gpu.model, "AMD Instinct MI300X");
      EXPECT_EQ(gpu.render_node, fmt::format("renderD{}", 128 + gpu.index));
      EXPECT_EQ(gpu.nics, Names{fmt::format("mlx5_{}", gpu.index)});
    }
    EXPECT_TRUE(layout::FormatNodeLine("mi", layout).find(" Gres=gpu:mi300x:8") !=
                std::string::npos)
        << layout::FormatNodeLine("mi", layout);
    absl::StatusOr<std::vector<binding::RankBinding>> plan = binding::PlanBinding(
        layout, {.gpus = 0xff, .ranks = 8, .cpus_per_task = 48, .options = {}});
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const binding::RankBinding& rank : *plan) {
      ASSERT_EQ(rank.gpus.size(), 1U);
      EXPECT_EQ(rank.nccl_ib_hca, fmt::format("=mlx5_{}", rank.gpus.front()));
      EXPECT_EQ(rank.cpus.size(), 48U);
    }
    if (name == "mi300x-nps4.xml") {
      EXPECT_EQ((*plan)[3].numa_nodes, Ints{3});
      EXPECT_EQ((*plan)[3].mem_numa, Ints{3});
    }
  }
}

// hwloc without its NVML and CUDA plugins (Debian's) still sees the GPUs'
// PCI devices: the same GPUs, by bus order.
TEST(HwlocLayoutTest, FindsGpusByPciWithoutNvmlOrCuda) {
  for (const std::string name : {"power8-4gpu.xml", "dgx-h100-like.xml", "nvidia-dgx2.xml"}) {
    SCOPED_TRACE(name);
    const std::string original = testing::ReadData("hwloc/" + name);
    std::string text = original;
    for (const std::string from : {"name=\"nvml", "name=\"cuda", "\"NVML\"", "\"CUDA\""}) {
      for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
        text.replace(at, from.size(), from.front() == 'n' ? "name=\"gone" : "\"Gone\"");
      }
    }
    const std::string path = ::testing::TempDir() + "/pci-only-" + name;
    std::ofstream(path) << text;
    const NodeLayout layout = MustLoad(path);
    const NodeLayout full = MustLoad(testing::DataPath("hwloc/" + name));
    ASSERT_EQ(layout.gpus.size(), full.gpus.size());
    for (std::size_t i = 0; i < layout.gpus.size(); ++i) {
      EXPECT_EQ(layout.gpus[i].name, "pci");
      EXPECT_EQ(layout.gpus[i].pci_bus_id, full.gpus[i].pci_bus_id);
      EXPECT_EQ(layout.gpus[i].numa, full.gpus[i].numa);
    }
    std::filesystem::remove(path);
  }
}

TEST(HwlocLayoutTest, BadFilesAreErrors) {
  absl::StatusOr<NodeLayout> missing = LoadLayoutFromXml(testing::DataPath("hwloc/nope.xml"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/not-a-topology.xml";
  std::ofstream(path) << "NodeName=n1 CPUs=4\n";
  absl::StatusOr<NodeLayout> garbage = LoadLayoutFromXml(path);
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument) << garbage.status();
  EXPECT_NE(garbage.status().message().find("hwloc cannot read the topology"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(HwlocLayoutTest, DiscoversThisMachine) {
  std::string xml;
  absl::StatusOr<NodeLayout> layout = DiscoverHostLayout(&xml);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_GE(layout->PuCount(), 1);
  EXPECT_GE(layout->numa_nodes.size(), 1U);
  EXPECT_GE(layout->MemoryMb(), 1);
  // Its XML, for the PMIx servers, reads back as the same machine.
  ASSERT_FALSE(xml.empty());
  const std::string path = ::testing::TempDir() + "/host-topology.xml";
  {
    std::ofstream out(path);
    out << xml;
  }
  absl::StatusOr<NodeLayout> again = LoadLayoutFromXml(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->PuCount(), layout->PuCount());
  EXPECT_EQ(again->numa_nodes.size(), layout->numa_nodes.size());
}

}  // namespace
}  // namespace cohort::agent
