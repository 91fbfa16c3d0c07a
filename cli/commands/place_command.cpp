// SPDX-License-Identifier: Apache-2.0
#include <bit>
#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster_files.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/placement_check.h"
#include "cohort/fmt_absl.h"
#include "cohort/plugin.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_memory.h"
#include "commands/commands.h"

namespace cohort::cli {

using shell::ClusterPaths;
using shell::LoadCluster;
using shell::LoadedCluster;
using shell::ReportDiagnostics;
namespace {

struct PlaceOptions {
  std::string config;
  std::string topology;
  int nodes = 0;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::string memory;
  std::string partition;
  std::string constraint;
  std::string nodelist;
  std::string exclude;
  std::string exclusive;  ///< empty: shared; node or topo
  std::string switches;
  int segment = 0;
  bool spread_segments = false;
  std::string busy;
  std::string down;
  std::string drained;
  bool json = false;
};

// Resolves a hostlist option to node ids, or explains which names are unknown.
absl::StatusOr<std::vector<alloc::NodeId>> Resolve(const topology::Topology& topo,
                                                   std::string_view option,
                                                   const std::string& list) {
  std::vector<alloc::NodeId> ids;
  if (list.empty()) return ids;
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(list);
  if (!names.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", option, names.status()));
  }
  std::vector<std::string> unknown;
  for (const std::string& name : *names) {
    if (const std::optional<alloc::NodeId> id = topo.FindNode(name)) {
      ids.push_back(*id);
    } else {
      unknown.push_back(name);
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no such nodes: {}; see cohort config check",
                                                  option, hostlist::Compress(unknown)));
  }
  return ids;
}

// GPU indices as ranges: 0-3,6.
std::string GpuList(std::uint64_t mask) {
  std::vector<std::string> ranges;
  for (int i = 0; i < 64;) {
    if (((mask >> i) & 1U) == 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 64 && ((mask >> (j + 1)) & 1U) != 0) ++j;
    ranges.push_back(i == j ? std::to_string(i) : fmt::format("{}-{}", i, j));
    i = j + 1;
  }
  return ranges.empty() ? "-" : fmt::format("{}", fmt::join(ranges, ","));
}

// The nodes that --busy, --down and --drained name: what the other jobs and
// the operators hold while the request is placed.
struct MarkedNodes {
  std::vector<alloc::NodeId> busy;
  std::vector<alloc::NodeId> down;
  std::vector<alloc::NodeId> drained;
};

// --switches=N[@wait]: offline there is no waiting, so only N matters.
absl::StatusOr<int> SwitchCount(const std::string& switches) {
  const std::string count = switches.substr(0, switches.find('@'));
  int n = 0;
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), n);
  if (count.empty() || error != std::errc() || end != count.data() + count.size() || n < 1) {
    return absl::InvalidArgumentError(
        fmt::format("--switches \"{}\": write N or N@TIME with N at least 1", switches));
  }
  return n;
}

// As sbatch does: the default partition unless one is named.
absl::Status ChoosePartition(const PlaceOptions& o, const LoadedCluster& loaded,
                             alloc::GangRequest& request) {
  const alloc::NodePool& pool = *loaded.pool;
  const config::PartitionSpec* fallback = loaded.config.DefaultPartition();
  const std::string partition =
      !o.partition.empty() ? o.partition : (fallback != nullptr ? fallback->name : "");
  if (partition.empty()) return absl::OkStatus();
  request.partition = pool.FindPartition(partition);
  if (request.partition) return absl::OkStatus();
  std::vector<std::string> known;
  for (alloc::PartitionId p = 0; p < pool.PartitionCount(); ++p) {
    known.push_back(pool.GetPartition(p).name);
  }
  return absl::InvalidArgumentError(
      fmt::format("-p: no partition {}; partitions: {}", partition, fmt::join(known, ", ")));
}

// The request the options describe, checked as the controller checks one;
// the nodes to mark before placing it go to `marked`. InvalidArgument names
// the option at fault.
absl::StatusOr<alloc::GangRequest> BuildRequest(const PlaceOptions& o, const LoadedCluster& loaded,
                                                MarkedNodes& marked) {
  alloc::GangRequest request;
  request.nodes = o.nodes;
  request.tasks_per_node = o.tasks_per_node;
  request.cpus_per_task = o.cpus_per_task;
  request.gpus_per_node = o.gpus_per_node;
  request.exclusivity = o.exclusive.empty()     ? alloc::Exclusivity::kShared
                        : o.exclusive == "topo" ? alloc::Exclusivity::kTopo
                                                : alloc::Exclusivity::kExclusive;
  if (o.segment != 0) request.segment = o.segment;
  request.spread_segments = o.spread_segments;
  if (!o.memory.empty()) {
    absl::StatusOr<std::int64_t> mb = ParseSlurmMemoryMb(o.memory);
    if (!mb.ok()) return absl::InvalidArgumentError(fmt::format("--mem: {}", mb.status()));
    request.memory_mb_per_node = *mb;
  }
  if (!o.switches.empty()) {
    absl::StatusOr<int> leaves = SwitchCount(o.switches);
    if (!leaves.ok()) return leaves.status();
    request.max_leaves = *leaves;
  }
  if (absl::Status chosen = ChoosePartition(o, loaded, request); !chosen.ok()) return chosen;
  for (std::string feature : std::vector<std::string>{o.constraint}) {
    std::size_t start = 0;
    while (start < feature.size()) {
      const std::size_t stop = feature.find_first_of(",&", start);
      const std::string item = feature.substr(start, stop - start);
      if (!item.empty()) request.features.push_back(item);
      if (stop == std::string::npos) break;
      start = stop + 1;
    }
  }
  struct Marked {
    std::string_view option;
    const std::string& list;
    std::vector<alloc::NodeId>* out;
  };
  for (const Marked& m :
       {Marked{"--nodelist", o.nodelist, &request.required_nodes},
        Marked{"--exclude", o.exclude, &request.excluded_nodes},
        Marked{"--busy", o.busy, &marked.busy}, Marked{"--down", o.down, &marked.down},
        Marked{"--drained", o.drained, &marked.drained}}) {
    absl::StatusOr<std::vector<alloc::NodeId>> ids = Resolve(loaded.topology, m.option, m.list);
    if (!ids.ok()) return ids.status();
    *m.out = *std::move(ids);
  }
  if (absl::Status valid = alloc::ValidateGangRequest(request); !valid.ok()) return valid;
  return request;
}

// What the other jobs hold: whole busy nodes; down and drained take none.
void MarkNodes(const MarkedNodes& marked, alloc::NodePool& pool) {
  for (const alloc::NodeId n : marked.busy) {
    if (pool.IsIdle(n)) {
      const alloc::NodeCapacity& c = pool.Capacity(n);
      const alloc::NodeGrant whole{n, c.cpus, c.memory_mb, alloc::AllGpus(c.gpus)};
      pool.Commit({&whole, 1});
    }
  }
  for (const alloc::NodeId n : marked.down) pool.SetCondition(n, alloc::NodeCondition::kDown);
  for (const alloc::NodeId n : marked.drained) {
    pool.SetCondition(n, alloc::NodeCondition::kDrained);
  }
}

const char* OutcomeName(alloc::Outcome outcome) {
  return outcome == alloc::Outcome::kPlaced ? "placed"
         : outcome == alloc::Outcome::kBusy ? "busy"
                                            : "infeasible";
}

std::vector<std::string> NodeNames(const topology::Topology& topo, const alloc::Placement& p) {
  std::vector<std::string> names;
  for (const alloc::NodeGrant& g : p.grants) names.push_back(topo.NodeName(g.node));
  return names;
}

std::vector<std::string> LeafNames(const topology::Topology& topo, const alloc::Placement& p) {
  std::vector<std::string> leaves;
  for (const topology::SwitchId s : p.leaves) leaves.push_back(topo.GetSwitch(s).name);
  return leaves;
}

void PrintJson(const topology::Topology& topo, const alloc::PlacementResult& result,
               const alloc::PlacementReport* report) {
  const alloc::Placement& placement = result.placement;
  nlohmann::json out;
  out["outcome"] = OutcomeName(result.outcome);
  if (result.outcome == alloc::Outcome::kPlaced) {
    out["nodes"] = hostlist::Compress(NodeNames(topo, placement));
    out["rank_order"] = hostlist::CompressInOrder(NodeNames(topo, placement));
    if (report != nullptr) {
      out["placement"] = alloc::FormatPlacement(topo, *report);
      out["worst_hops"] = report->worst_hops;
    }
    out["switch"] = topo.GetSwitch(placement.domain).name;
    out["level"] = placement.level;
    out["leaves"] = LeafNames(topo, placement);
    nlohmann::json grants = nlohmann::json::array();
    for (const alloc::NodeGrant& g : placement.grants) {
      grants.push_back({{"node", topo.NodeName(g.node)},
                        {"cpus", g.cpus},
                        {"memory_mb", g.memory_mb},
                        {"gpus", GpuList(g.gpus)}});
    }
    out["grants"] = grants;
  } else {
    out["reason"] = result.reason;
  }
  std::cout << out.dump(2) << '\n';
}

void PrintText(const topology::Topology& topo, const alloc::PlacementResult& result,
               const alloc::PlacementReport* report) {
  if (result.outcome != alloc::Outcome::kPlaced) {
    std::cout << fmt::format("{}: {}\n", OutcomeName(result.outcome), result.reason);
    return;
  }
  const alloc::Placement& placement = result.placement;
  const std::vector<std::string> names = NodeNames(topo, placement);
  const std::vector<std::string> leaves = LeafNames(topo, placement);
  const topology::Switch& domain = topo.GetSwitch(placement.domain);
  std::cout << fmt::format("placed {} node{}: {}\n", names.size(), names.size() == 1 ? "" : "s",
                           hostlist::Compress(names));
  if (const std::string in_order = hostlist::CompressInOrder(names);
      in_order != hostlist::Compress(names)) {
    std::cout << fmt::format("  node ranks in topology order: {}\n", in_order);
  }
  std::cout << fmt::format("  under switch {} (level {} of {})\n", domain.name, placement.level,
                           topo.MaxLevel());
  std::cout << fmt::format("  spans {} leaf switch{}: {}\n", leaves.size(),
                           leaves.size() == 1 ? "" : "es", fmt::join(leaves, ", "));
  if (!topo.Blocks().empty()) {
    std::vector<std::string> blocks;
    for (const topology::GroupId g : placement.groups) {
      const topology::BlockId b = topo.Groups()[g].block;
      blocks.push_back(b == topology::kNone ? "(none)" : topo.Blocks()[b].name);
    }
    std::cout << fmt::format("  spans {} block{}: {}\n", blocks.size(),
                             blocks.size() == 1 ? "" : "s", fmt::join(blocks, ", "));
  }
  if (report != nullptr) {
    std::cout << fmt::format("  placement: {}\n", alloc::FormatPlacement(topo, *report));
  }
  for (const alloc::NodeGrant& g : placement.grants) {
    std::cout << fmt::format("  {:<12} cpus {:<4} mem {:<8} gpus {}\n", topo.NodeName(g.node),
                             g.cpus, g.memory_mb, GpuList(g.gpus));
  }
}

int Run(const PlaceOptions& o) {
  ClusterPaths paths;
  if (!o.config.empty()) paths.config = o.config;
  if (!o.topology.empty()) paths.topology = o.topology;
  if (!paths.config && !paths.topology) {
    std::cerr << "cohort: place needs -t topology.conf (and optionally -c cohort.conf)\n";
    return 2;
  }
  LoadedCluster loaded = LoadCluster(paths);
  if (!ReportDiagnostics(loaded)) return 2;
  MarkedNodes marked;
  absl::StatusOr<alloc::GangRequest> request = BuildRequest(o, loaded, marked);
  if (!request.ok()) {
    std::cerr << fmt::format("cohort: {}\n", request.status());
    return 2;
  }
  MarkNodes(marked, *loaded.pool);
  // The policies cohort.conf chooses (LoadCluster refused an unknown one).
  absl::StatusOr<plugin::PluginSet> plugins = plugin::MakePlugins(loaded.config.plugins);
  if (!plugins.ok()) {
    std::cerr << fmt::format("cohort: {}\n", plugins.status().message());
    return 2;
  }
  alloc::GangAllocator allocator(loaded.topology, plugins->allocator);
  const alloc::PlacementResult result = allocator.Place(*request, *loaded.pool);
  // The controller refuses a placement that breaks the request: so does this.
  std::optional<alloc::PlacementReport> report;
  if (result.outcome == alloc::Outcome::kPlaced) {
    absl::StatusOr<alloc::PlacementReport> checked =
        alloc::CheckPlacement(loaded.topology, *request, result.placement.grants);
    if (!checked.ok()) {
      std::cerr << fmt::format("cohort: {} (a bug; please report it)\n",
                               checked.status().message());
      return 3;
    }
    report = *std::move(checked);
  }
  if (o.json) {
    PrintJson(loaded.topology, result, report ? &*report : nullptr);
  } else {
    PrintText(loaded.topology, result, report ? &*report : nullptr);
  }
  return result.outcome == alloc::Outcome::kPlaced ? 0 : 1;
}

}  // namespace

void AddPlaceCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlaceOptions>();
  CLI::App* place = app.add_subcommand(
      "place", "show where the gang allocator would put a job, offline (no controller needed)");
  place->add_option("-c,--config", o->config, "cohort.conf to read");
  place->add_option("-t,--topology", o->topology, "topology.conf to read");
  place->add_option("-N,--nodes", o->nodes, "nodes of the job")->required();
  place->add_option("--ntasks-per-node", o->tasks_per_node, "ranks per node");
  place->add_option("--cpus-per-task", o->cpus_per_task, "CPUs per rank");
  place->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node");
  place->add_option("--mem", o->memory, "memory per node (MB, or with a K/M/G/T unit)");
  place->add_option("-p,--partition", o->partition, "partition (default: the default partition)");
  place->add_option("-C,--constraint", o->constraint, "required node features, comma separated");
  place->add_option("-w,--nodelist", o->nodelist, "nodes that must be in the gang (hostlist)");
  place->add_option("-x,--exclude", o->exclude, "nodes that must not be (hostlist)");
  place->add_flag("--exclusive{node}", o->exclusive, "whole nodes only; =topo: whole blocks too")
      ->check(CLI::IsMember({"node", "topo"}));
  place->add_option("--switches", o->switches, "at most N leaf switches: N[@wait]");
  place->add_option("--segment", o->segment, "place in pieces of S nodes, each inside one block");
  place->add_flag("--spread-segments", o->spread_segments, "each segment in a block of its own");
  place->add_option("--busy", o->busy, "nodes taken whole by other jobs (hostlist)");
  place->add_option("--down", o->down, "nodes that are down (hostlist)");
  place->add_option("--drained", o->drained, "nodes that are drained (hostlist)");
  place->add_flag("--json", o->json, "print the result as JSON");
  place->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace cohort::cli
