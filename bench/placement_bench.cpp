// SPDX-License-Identifier: Apache-2.0
// One placement of a 64-node, 8-GPU-per-node job on a fat tree at 50 % random
// occupancy, at 1,024 and at 16,384 nodes; and the same job in segments of 4
// on the same tree with NVLink blocks of 16 nodes. Results:
// docs/performance.md.
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"

namespace {

using cohort::alloc::GangAllocator;
using cohort::alloc::GangRequest;
using cohort::alloc::NodeGrant;
using cohort::alloc::NodePool;

// A three-level fat tree: leaves of 32 nodes, pods of `leaves_per_pod`
// leaves, one core switch.
std::string FatTree(int nodes, int leaves_per_pod, int block_size = 0) {
  const int per_leaf = 32;
  const int leaves = nodes / per_leaf;
  std::string text;
  for (int l = 0; l < leaves; ++l) {
    text += fmt::format("SwitchName=leaf{:04} Nodes=gpu[{:05}-{:05}]\n", l, l * per_leaf + 1,
                        (l + 1) * per_leaf);
  }
  const int pods = leaves / leaves_per_pod;
  for (int p = 0; p < pods; ++p) {
    text += fmt::format("SwitchName=pod{:03} Switches=leaf[{:04}-{:04}]\n", p, p * leaves_per_pod,
                        (p + 1) * leaves_per_pod - 1);
  }
  text += fmt::format("SwitchName=core Switches=pod[000-{:03}]\n", pods - 1);
  for (int b = 0; block_size > 0 && b < nodes / block_size; ++b) {
    text += fmt::format("BlockName=nvl{:04} Nodes=gpu[{:05}-{:05}]\n", b, b * block_size + 1,
                        (b + 1) * block_size);
  }
  return text;
}

struct Fixture {
  cohort::topology::Topology topology;
  NodePool pool;
};

Fixture MakeCluster(int nodes, int leaves_per_pod, int block_size = 0) {
  cohort::topology::TopologyResult built =
      cohort::topology::BuildTopology(FatTree(nodes, leaves_per_pod, block_size), "bench", {},
                                      cohort::topology::NodeSource::kTopology);
  std::vector<cohort::config::NodeSpec> specs;
  for (const std::string& name : built.topology.NodeNames()) {
    cohort::config::NodeSpec spec;
    spec.name = name;
    spec.cpus = 224;
    spec.gpus = 8;
    spec.memory_mb = 2'000'000;
    specs.push_back(spec);
  }
  NodePool pool = NodePool::Create(built.topology, specs, {}).value();
  // Half of the nodes, chosen at random with a fixed seed, run other jobs.
  std::mt19937 random(42);
  std::vector<int> order(static_cast<std::size_t>(nodes));
  for (int i = 0; i < nodes; ++i) order[static_cast<std::size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), random);
  for (int i = 0; i < nodes / 2; ++i) {
    const NodeGrant whole{order[static_cast<std::size_t>(i)], 224, 2'000'000, 0xff};
    pool.Commit({&whole, 1});
  }
  return Fixture{std::move(built.topology), std::move(pool)};
}

void Place(benchmark::State& state, int block_size, int segment) {
  const int nodes = static_cast<int>(state.range(0));
  const Fixture cluster = MakeCluster(nodes, nodes >= 16384 ? 32 : 8, block_size);
  GangAllocator allocator(cluster.topology);
  GangRequest request;
  request.nodes = 64;
  request.gpus_per_node = 8;
  request.tasks_per_node = 8;
  request.cpus_per_task = 16;
  if (segment > 0) request.segment = segment;
  for (auto _ : state) {
    auto result = allocator.Place(request, cluster.pool);
    if (result.outcome != cohort::alloc::Outcome::kPlaced) {
      state.SkipWithError("the job did not fit");
      break;
    }
    benchmark::DoNotOptimize(result);
  }
  state.SetLabel(segment > 0 ? fmt::format("{} nodes in blocks of {}, 50% busy, 64-node job in "
                                           "segments of {}",
                                           nodes, block_size, segment)
                             : fmt::format("{} nodes, 50% busy, 64-node job", nodes));
}

void PlaceGang(benchmark::State& state) { Place(state, 0, 0); }
void PlaceSegmentedGang(benchmark::State& state) { Place(state, 16, 4); }

}  // namespace

BENCHMARK(PlaceGang)->Arg(1024)->Arg(16384)->Unit(benchmark::kMicrosecond);
BENCHMARK(PlaceSegmentedGang)->Arg(1024)->Arg(16384)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
