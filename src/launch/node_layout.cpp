// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/node_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>

namespace cohort::layout {
namespace {

int CountPus(const std::vector<Core>& cores) {
  int n = 0;
  for (const Core& core : cores) n += static_cast<int>(core.pus.size());
  return n;
}

std::string NumaText(int numa) { return numa < 0 ? "unknown" : std::to_string(numa); }

}  // namespace

int NodeLayout::PuCount() const {
  int n = CountPus(cores_without_numa);
  for (const NumaNode& node : numa_nodes) n += CountPus(node.cores);
  return n;
}

int NodeLayout::CoreCount() const {
  std::size_t n = cores_without_numa.size();
  for (const NumaNode& node : numa_nodes) n += node.cores.size();
  return static_cast<int>(n);
}

int NodeLayout::ThreadsPerCore() const {
  std::size_t most = 1;
  for (const Core& core : cores_without_numa) most = std::max(most, core.pus.size());
  for (const NumaNode& node : numa_nodes) {
    for (const Core& core : node.cores) most = std::max(most, core.pus.size());
  }
  return static_cast<int>(most);
}

std::int64_t NodeLayout::MemoryMb() const {
  std::int64_t total = 0;
  for (const NumaNode& node : numa_nodes) total += node.memory_mb;
  return total;
}

const NumaNode* NodeLayout::FindNuma(int os_index) const {
  for (const NumaNode& node : numa_nodes) {
    if (node.os_index == os_index) return &node;
  }
  return nullptr;
}

std::vector<std::uint64_t> GpuGroups(const NodeLayout& layout) {
  if (layout.gpus.size() > 64) return {};
  std::map<int, std::uint64_t> by_numa;  // -1 (unknown) sorts first; moved last below
  for (const Gpu& gpu : layout.gpus) {
    if (gpu.index < 0 || gpu.index >= 64) return {};
    by_numa[gpu.numa] |= std::uint64_t{1} << gpu.index;
  }
  if (by_numa.empty() || (by_numa.size() == 1 && by_numa.begin()->first < 0)) return {};
  std::vector<std::uint64_t> groups;
  for (const auto& [numa, mask] : by_numa) {
    if (numa >= 0) groups.push_back(mask);
  }
  if (const auto unknown = by_numa.find(-1); unknown != by_numa.end()) {
    groups.push_back(unknown->second);
  }
  return groups;
}

std::vector<Gpu> ConfiguredGpus(int count, std::span<const int> numa) {
  std::vector<Gpu> gpus;
  for (int i = 0; i < count; ++i) {
    const std::size_t at = static_cast<std::size_t>(i);
    gpus.push_back(
        {.index = i, .name = "config", .pci_bus_id = {}, .numa = at < numa.size() ? numa[at] : -1});
  }
  return gpus;
}

NodeLayout ApproximateLayout(int cpus, std::int64_t memory_mb, int gpus,
                             std::span<const int> gpu_numa) {
  int numa_count = 1;
  for (const int n : gpu_numa) numa_count = std::max(numa_count, n + 1);
  NodeLayout layout;
  layout.sockets = numa_count;
  int next_pu = 0;
  for (int n = 0; n < numa_count; ++n) {
    NumaNode node;
    node.os_index = n;
    node.memory_mb = memory_mb / numa_count + (n < memory_mb % numa_count ? 1 : 0);
    const int cores = cpus / numa_count + (n < cpus % numa_count ? 1 : 0);
    for (int c = 0; c < cores; ++c) node.cores.push_back(Core{{next_pu++}});
    layout.numa_nodes.push_back(std::move(node));
  }
  if (gpu_numa.empty()) {
    const std::vector<int> zeros(static_cast<std::size_t>(std::max(gpus, 0)), 0);
    layout.gpus = ConfiguredGpus(gpus, zeros);
  } else {
    layout.gpus = ConfiguredGpus(gpus, gpu_numa);
  }
  return layout;
}

std::string FormatNodeLine(std::string_view name, const NodeLayout& layout) {
  const int sockets = std::max(layout.sockets, 1);
  const int cores = layout.CoreCount();
  std::string line = fmt::format(
      "NodeName={} CPUs={} Sockets={} CoresPerSocket={} ThreadsPerCore={} "
      "MemoryMB={}",
      name, layout.PuCount(), sockets, std::max(cores / sockets, 1), layout.ThreadsPerCore(),
      std::max<std::int64_t>(layout.MemoryMb(), 1));
  if (layout.gpus.empty()) return line;
  // One type for every GPU: Slurm's Gres= with it, so that jobs can ask it.
  const std::string type = GpuTypeOf(layout.gpus.front().model);
  const bool one_type =
      !type.empty() && std::all_of(layout.gpus.begin(), layout.gpus.end(),
                                   [&](const Gpu& gpu) { return GpuTypeOf(gpu.model) == type; });
  line += one_type ? fmt::format(" Gres=gpu:{}:{}", type, layout.gpus.size())
                   : fmt::format(" Gpus={}", layout.gpus.size());
  const bool all_known = std::all_of(layout.gpus.begin(), layout.gpus.end(),
                                     [](const Gpu& gpu) { return gpu.numa >= 0; });
  if (all_known) {
    std::vector<int> numa;
    for (const Gpu& gpu : layout.gpus) numa.push_back(gpu.numa);
    line += fmt::format(" GpuNuma={}", fmt::join(numa, ","));
  }
  return line;
}

std::string GpuTypeOf(std::string_view model) {
  // Words that name a vendor or a product line, not the model.
  constexpr std::string_view kBrands[] = {"nvidia", "tesla",    "geforce", "quadro", "amd",
                                          "radeon", "instinct", "intel",   "data",   "center"};
  std::vector<std::string> words;
  for (std::size_t start = 0; start < model.size();) {
    const std::size_t stop = std::min(model.find(' ', start), model.size());
    std::string word;
    for (const char c : model.substr(start, stop - start)) {
      if (c == '-') break;
      if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
    const bool brand = std::find(std::begin(kBrands), std::end(kBrands), word) != std::end(kBrands);
    if (!word.empty() && !brand) words.push_back(std::move(word));
    start = stop + 1;
  }
  if (words.empty()) return "";
  // A product line's letters name no model alone: RTX 4090 is rtx4090.
  if ((words[0] == "rtx" || words[0] == "gtx") && words.size() > 1) return words[0] + words[1];
  return words[0];
}

std::string DescribeLayout(const NodeLayout& layout) {
  std::string out;
  for (const NumaNode& node : layout.numa_nodes) {
    std::vector<int> pus;
    for (const Core& core : node.cores) pus.insert(pus.end(), core.pus.begin(), core.pus.end());
    std::vector<std::string> gpus;
    for (const Gpu& gpu : layout.gpus) {
      if (gpu.numa == node.os_index) gpus.push_back(std::to_string(gpu.index));
    }
    std::vector<std::string> nics;
    for (const Nic& nic : layout.nics) {
      if (nic.numa == node.os_index) nics.push_back(nic.name);
    }
    out += fmt::format("numa {}: {} MB, {} core{}, cpus {}, gpus {}, nics {}\n", node.os_index,
                       node.memory_mb, node.cores.size(), node.cores.size() == 1 ? "" : "s",
                       pus.empty() ? "none" : FormatCpuList(pus),
                       gpus.empty() ? "none" : fmt::format("{}", fmt::join(gpus, ",")),
                       nics.empty() ? "none" : fmt::format("{}", fmt::join(nics, ",")));
  }
  if (!layout.cores_without_numa.empty()) {
    std::vector<int> pus;
    for (const Core& core : layout.cores_without_numa) {
      pus.insert(pus.end(), core.pus.begin(), core.pus.end());
    }
    out += fmt::format("no numa: {} core{}, cpus {} (not bound to)\n",
                       layout.cores_without_numa.size(),
                       layout.cores_without_numa.size() == 1 ? "" : "s", FormatCpuList(pus));
  }
  for (const Gpu& gpu : layout.gpus) {
    out += fmt::format("gpu {}: {}{} numa {}{}{}\n", gpu.index, gpu.name,
                       gpu.pci_bus_id.empty() ? "" : " pci " + gpu.pci_bus_id, NumaText(gpu.numa),
                       gpu.render_node.empty() ? "" : " /dev/dri/" + gpu.render_node,
                       gpu.nics.empty() ? "" : fmt::format(" rail {}", fmt::join(gpu.nics, ",")));
  }
  for (const Nic& nic : layout.nics) {
    out += fmt::format("nic {}: numa {}\n", nic.name, NumaText(nic.numa));
  }
  if (layout.gpus.empty()) out += "gpus: none\n";
  if (layout.nics.empty()) out += "nics: none\n";
  return out;
}

std::string FormatCpuList(std::span<const int> cpus) {
  std::vector<int> sorted(cpus.begin(), cpus.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace cohort::layout
