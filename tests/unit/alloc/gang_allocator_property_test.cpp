// SPDX-License-Identifier: Apache-2.0
// Randomized property tests of the gang allocator. Each prints its seed on
// failure; rerun one with COHORT_SEED=<seed>.
#include <bit>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/placement_check.h"
#include "test_support.h"

namespace cohort::alloc {
namespace {

std::uint64_t Seed(std::uint64_t fallback) {
  const char* text = std::getenv("COHORT_SEED");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : fallback;
}

int Pick(std::mt19937_64& random, int low, int high) {
  return std::uniform_int_distribution<int>(low, high)(random);
}

// What the test believes is allocated, kept apart from the pool.
class Shadow {
 public:
  explicit Shadow(const NodePool& pool) : used_(static_cast<std::size_t>(pool.NodeCount())) {}

  // Adds a gang; fails the test when it overlaps anything already held.
  void Take(std::span<const NodeGrant> grants) {
    for (const NodeGrant& g : grants) {
      Used& u = used_[static_cast<std::size_t>(g.node)];
      ASSERT_EQ(u.gpus & g.gpus, 0U) << "gpu allocated twice on node " << g.node;
      u.cpus += g.cpus;
      u.memory_mb += g.memory_mb;
      u.gpus |= g.gpus;
    }
  }
  void Give(std::span<const NodeGrant> grants) {
    for (const NodeGrant& g : grants) {
      Used& u = used_[static_cast<std::size_t>(g.node)];
      u.cpus -= g.cpus;
      u.memory_mb -= g.memory_mb;
      u.gpus &= ~g.gpus;
    }
  }
  // The pool's free resources must be exactly capacity minus what is held.
  void Check(const NodePool& pool) const {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) {
      const Used& u = used_[static_cast<std::size_t>(n)];
      const NodeCapacity& c = pool.Capacity(n);
      const NodeFree& f = pool.Free(n);
      ASSERT_GE(f.cpus, 0) << "node " << n;
      ASSERT_EQ(f.cpus, c.cpus - u.cpus) << "node " << n;
      ASSERT_EQ(f.memory_mb, c.memory_mb - u.memory_mb) << "node " << n;
      ASSERT_EQ(f.gpus, AllGpus(c.gpus) & ~u.gpus) << "node " << n;
    }
  }

 private:
  struct Used {
    int cpus = 0;
    std::int64_t memory_mb = 0;
    std::uint64_t gpus = 0;
  };
  std::vector<Used> used_;
};

GangRequest RandomRequest(std::mt19937_64& random, const testing::Cluster& cluster, int max_nodes) {
  GangRequest r;
  r.nodes = Pick(random, 1, 3) == 1 ? Pick(random, 1, max_nodes) : Pick(random, 1, 8);
  static constexpr int kGpus[] = {0, 1, 2, 4, 8};
  r.gpus_per_node = kGpus[Pick(random, 0, 4)];
  r.tasks_per_node = std::max(1, r.gpus_per_node);
  r.cpus_per_task = Pick(random, 1, 8);
  r.memory_mb_per_node = Pick(random, 0, 1) * Pick(random, 1, 64) * 1024;
  if (Pick(random, 0, 9) == 0) r.exclusivity = Exclusivity::kExclusive;
  if (Pick(random, 0, 9) == 0) r.max_leaves = Pick(random, 1, 4);
  if (!cluster.topology.Blocks().empty() && Pick(random, 0, 4) == 0) {
    r.segment = Pick(random, 1, 9);
    r.nodes = r.segment.value() * Pick(random, 1, 4);
    r.spread_segments = Pick(random, 0, 3) == 0;
  }
  if (Pick(random, 0, 19) == 0) {
    r.excluded_nodes.push_back(Pick(random, 0, cluster.topology.NodeCount() - 1));
  }
  return r;
}

// Checks one placement against the request: whole, distinct, as asked, on
// nodes that are up, with the span it claims, in topology order; and the
// engine's own check (alloc::CheckPlacement) agrees.
void CheckAgainstRequest(const GangRequest& r, const Placement& p,
                         const testing::Cluster& cluster) {
  ASSERT_EQ(static_cast<int>(p.grants.size()), r.nodes);
  std::vector<NodeId> nodes;
  std::map<topology::GroupId, int> per_group;
  for (const NodeGrant& g : p.grants) {
    nodes.push_back(g.node);
    ++per_group[cluster.topology.GroupOf(g.node)];
    ASSERT_EQ(cluster.pool.Condition(g.node), NodeCondition::kUp);
    for (const NodeId x : r.excluded_nodes) ASSERT_NE(g.node, x);
    const NodeCapacity& c = cluster.pool.Capacity(g.node);
    if (r.exclusivity == Exclusivity::kExclusive) {
      ASSERT_TRUE(cluster.pool.IsIdle(g.node));
      ASSERT_EQ(g.cpus, c.cpus);
      ASSERT_EQ(g.gpus, AllGpus(c.gpus));
    } else {
      ASSERT_EQ(g.cpus, r.tasks_per_node * r.cpus_per_task);
      ASSERT_EQ(g.memory_mb, r.memory_mb_per_node);
      ASSERT_EQ(std::popcount(g.gpus), r.gpus_per_node);
    }
  }
  const topology::Topology& topo = cluster.topology;
  ASSERT_TRUE(std::is_sorted(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) {
    return topo.OrderOf(a) < topo.OrderOf(b);
  })) << "node ranks not in topology order";
  std::vector<NodeId> sorted = nodes;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "node twice in a gang";
  ASSERT_EQ(p.domain, cluster.topology.LowestCommonSwitch(nodes));
  if (r.max_leaves) {
    ASSERT_LE(static_cast<int>(p.leaves.size()), *r.max_leaves);
  }
  if (r.segment) {
    for (const auto& [group, count] : per_group) {
      ASSERT_EQ(count % *r.segment, 0);
    }
    // Every S consecutive ranks share one group; spread: no two segments do.
    std::set<topology::GroupId> used;
    for (std::size_t first = 0; first < nodes.size();
         first += static_cast<std::size_t>(*r.segment)) {
      const topology::GroupId group = topo.GroupOf(nodes[first]);
      for (int i = 1; i < *r.segment; ++i) {
        ASSERT_EQ(topo.GroupOf(nodes[first + static_cast<std::size_t>(i)]), group);
      }
      if (r.spread_segments) {
        ASSERT_TRUE(used.insert(group).second) << "two segments in one group";
      }
    }
  }
  if (!topo.BlockLevels().empty() && !r.segment) {
    // BlockSizes: inside one aggregate of a level that holds the job, or in no block.
    bool inside = std::all_of(nodes.begin(), nodes.end(),
                              [&](NodeId n) { return topo.BlockOf(n) == topology::kNone; });
    for (const topology::BlockLevel& level : topo.BlockLevels()) {
      if (level.size < r.nodes) continue;
      for (const std::vector<topology::BlockId>& aggregate : level.aggregates) {
        inside = inside || std::all_of(nodes.begin(), nodes.end(), [&](NodeId n) {
                   return std::find(aggregate.begin(), aggregate.end(), topo.BlockOf(n)) !=
                          aggregate.end();
                 });
      }
    }
    ASSERT_TRUE(inside) << "a placement outside every BlockSizes aggregate";
  }
  const absl::StatusOr<PlacementReport> report = alloc::CheckPlacement(topo, r, p.grants);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->nodes, nodes);
  ASSERT_EQ(report->domain, p.domain);
  if (r.segment) {
    ASSERT_EQ(static_cast<int>(report->segments.size()), r.nodes / *r.segment);
  }
}

void RandomSteps(const std::string& topology_file, std::uint64_t seed, int steps,
                 std::string_view extra_lines = "") {
  SCOPED_TRACE(fmt::format("{} COHORT_SEED={}", topology_file, seed));
  config::NodeSpec spec;
  spec.cpus = 64;
  spec.gpus = 8;
  spec.memory_mb = 512 * 1024;
  testing::Cluster cluster = testing::ClusterFromTopology(
      testing::ReadData(topology_file) + std::string(extra_lines), spec);
  std::mt19937_64 random(seed);
  GangAllocator allocator(cluster.topology);
  Shadow shadow(cluster.pool);
  std::vector<std::vector<NodeGrant>> live;
  const int node_count = cluster.topology.NodeCount();
  int placed = 0;
  for (int step = 0; step < steps; ++step) {
    const int action = Pick(random, 0, 99);
    if (action < 2) {
      // Nodes come and go; placements must avoid those not up.
      const NodeId n = Pick(random, 0, node_count - 1);
      static constexpr NodeCondition kConditions[] = {
          NodeCondition::kUp, NodeCondition::kUp, NodeCondition::kDown, NodeCondition::kDrained};
      cluster.pool.SetCondition(n, kConditions[Pick(random, 0, 3)]);
    } else if (action < 55 || live.empty()) {
      const GangRequest request = RandomRequest(random, cluster, node_count / 4);
      const PlacementResult result = allocator.Place(request, cluster.pool);
      if (result.outcome == Outcome::kPlaced) {
        ASSERT_NO_FATAL_FAILURE(CheckAgainstRequest(request, result.placement, cluster))
            << "step " << step;
        cluster.pool.Commit(result.placement.grants);
        ASSERT_NO_FATAL_FAILURE(shadow.Take(result.placement.grants)) << "step " << step;
        live.push_back(result.placement.grants);
        ++placed;
      } else {
        ASSERT_TRUE(result.placement.grants.empty()) << "partial placement at step " << step;
        ASSERT_FALSE(result.reason.empty());
      }
    } else {
      const std::size_t i =
          static_cast<std::size_t>(Pick(random, 0, static_cast<int>(live.size()) - 1));
      cluster.pool.Release(live[i]);
      shadow.Give(live[i]);
      live[i] = std::move(live.back());
      live.pop_back();
    }
    ASSERT_NO_FATAL_FAILURE(shadow.Check(cluster.pool)) << "step " << step;
  }
  // Everything returned: the pool is whole again.
  for (const auto& grants : live) cluster.pool.Release(grants);
  for (NodeId n = 0; n < node_count; ++n) ASSERT_TRUE(cluster.pool.IsIdle(n));
  EXPECT_GT(placed, steps / 10) << "too few placements to mean anything";
}

TEST(GangAllocatorPropertyTest, FatTree1024RandomAllocateAndFree) {
  RandomSteps("topologies/fat-tree-1024.conf", Seed(20261129), 100'000);
}

TEST(GangAllocatorPropertyTest, Gb200BlocksRandomAllocateAndFree) {
  RandomSteps("topologies/gb200-nvl72.conf", Seed(72), 100'000);
}

TEST(GangAllocatorPropertyTest, Gb200BlockSizesRandomAllocateAndFree) {
  RandomSteps("topologies/gb200-nvl72.conf", Seed(1872), 50'000, "BlockSizes=18,36,72\n");
}

// A random tree of at most 4 leaves and 24 nodes: one spine, two pods and a
// core, or two disconnected parts.
std::string RandomSmallTree(std::mt19937_64& random) {
  const int leaves = Pick(random, 1, 4);
  std::string text;
  int next = 1;
  for (int l = 0; l < leaves; ++l) {
    const int nodes = Pick(random, 1, 6);
    text += fmt::format("SwitchName=l{} Nodes=n[{}-{}]\n", l, next, next + nodes - 1);
    next += nodes;
  }
  const int shape = leaves == 1 ? 0 : Pick(random, 0, 2);
  if (shape == 0 && leaves > 1) {
    text += fmt::format("SwitchName=spine Switches=l[0-{}]\n", leaves - 1);
  } else if (shape == 1) {
    const int split = Pick(random, 1, leaves - 1);
    text += fmt::format("SwitchName=p0 Switches=l[0-{}]\n", split - 1);
    text += fmt::format("SwitchName=p1 Switches=l[{}-{}]\n", split, leaves - 1);
    text += "SwitchName=core Switches=p[0-1]\n";
  } else if (shape == 2) {
    // Leaf 0 alone; the others under one switch: two trees.
    if (leaves > 2) text += fmt::format("SwitchName=s1 Switches=l[1-{}]\n", leaves - 1);
  }
  return text;
}

TEST(GangAllocatorPropertyTest, SmallTreesReachTheBruteForceOptimum) {
  const std::uint64_t seed = Seed(4242);
  std::mt19937_64 random(seed);
  config::NodeSpec spec;
  spec.cpus = 8;
  spec.gpus = 4;
  spec.memory_mb = 1024;
  for (int trial = 0; trial < 20'000; ++trial) {
    const std::string text = RandomSmallTree(random);
    SCOPED_TRACE(fmt::format("COHORT_SEED={} trial {}\n{}", seed, trial, text));
    testing::Cluster cluster = testing::ClusterFromTopology(text, spec);
    const topology::Topology& topo = cluster.topology;
    // Random occupancy and node conditions.
    for (NodeId n = 0; n < topo.NodeCount(); ++n) {
      const int gpus_used = Pick(random, 0, 4);
      const NodeGrant used{n, Pick(random, 0, 8), 0, AllGpus(gpus_used)};
      cluster.pool.Commit({&used, 1});
      if (Pick(random, 0, 9) == 0) cluster.pool.SetCondition(n, NodeCondition::kDown);
    }
    GangRequest request;
    request.nodes = Pick(random, 1, topo.NodeCount());
    request.gpus_per_node = Pick(random, 0, 4);
    request.cpus_per_task = Pick(random, 1, 8);

    // Brute force: every subset of leaves whose fitting nodes suffice; the
    // best is the lowest common switch, then the fewest leaves.
    std::vector<int> fit_per_leaf;
    std::vector<topology::SwitchId> leaves;
    for (const topology::SwitchId s : topo.SwitchesByLevel()) {
      if (!topo.GetSwitch(s).children.empty()) continue;
      int fit = 0;
      for (const NodeId n : topo.GetSwitch(s).nodes) {
        const NodeFree& f = cluster.pool.Free(n);
        fit += cluster.pool.Condition(n) == NodeCondition::kUp && f.cpus >= request.cpus_per_task &&
               std::popcount(f.gpus) >= request.gpus_per_node;
      }
      leaves.push_back(s);
      fit_per_leaf.push_back(fit);
    }
    std::optional<std::pair<int, int>> best;  // (level, leaves)
    for (unsigned mask = 1; mask < (1U << leaves.size()); ++mask) {
      int fit = 0;
      topology::SwitchId common = topology::kNone;
      bool first = true;
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        if (((mask >> i) & 1U) == 0) continue;
        fit += fit_per_leaf[i];
        common = first ? leaves[i] : topo.LowestCommonSwitch(common, leaves[i]);
        first = false;
      }
      if (fit < request.nodes || common == topology::kNone) continue;
      const std::pair<int, int> score{topo.GetSwitch(common).level, std::popcount(mask)};
      if (!best || score < *best) best = score;
    }

    GangAllocator allocator(topo);
    const PlacementResult result = allocator.Place(request, cluster.pool);
    if (!best) {
      ASSERT_NE(result.outcome, Outcome::kPlaced);
      continue;
    }
    ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
    ASSERT_NO_FATAL_FAILURE(CheckAgainstRequest(request, result.placement, cluster));
    const std::pair<int, int> got{result.placement.level,
                                  static_cast<int>(result.placement.leaves.size())};
    ASSERT_EQ(got, *best) << "allocator (level, leaves) against the brute-force optimum";
  }
}

}  // namespace
}  // namespace cohort::alloc
