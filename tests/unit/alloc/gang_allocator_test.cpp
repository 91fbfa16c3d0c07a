// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/gang_allocator.h"

#include <fmt/format.h>
#include "cohort/alloc/placement_check.h"

#include <bit>

#include <gtest/gtest.h>

#include "test_support.h"

namespace cohort::alloc {
namespace {

using testing::Cluster;
using testing::ClusterBuilder;

// Takes whole nodes as another job would.
void Occupy(Cluster& cluster, const std::string& hostlist) {
  for (const NodeId n : cluster.Nodes(hostlist)) {
    const NodeCapacity& c = cluster.pool.Capacity(n);
    const NodeGrant whole{n, c.cpus, c.memory_mb, AllGpus(c.gpus)};
    cluster.pool.Commit({&whole, 1});
  }
}

GangRequest Nodes(int count) {
  GangRequest request;
  request.nodes = count;
  return request;
}

TEST(GangAllocatorTest, SmallJobLandsOnOneLeaf) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/small-2leaf.conf"),
                                                 config::DefaultNodeSpec(""));
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(4), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "node[1-4]");
  EXPECT_EQ(cluster.LeafNames(result.placement), std::vector<std::string>{"leaf0"});
  EXPECT_EQ(result.placement.level, 0);
}

TEST(GangAllocatorTest, BusyNodesPushTheJobToTheOtherLeaf) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/small-2leaf.conf"),
                                                 config::DefaultNodeSpec(""));
  Occupy(cluster, "node[1-2]");
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(4), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "node[5-8]");
  EXPECT_EQ(cluster.LeafNames(result.placement), std::vector<std::string>{"leaf1"});
}

TEST(GangAllocatorTest, MoreNodesThanTheClusterIsInfeasible) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/small-2leaf.conf"),
                                                 config::DefaultNodeSpec(""));
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(9), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason, "the cluster has 8 nodes; the job asks for 9");
  EXPECT_TRUE(result.placement.grants.empty());
}

TEST(GangAllocatorTest, FullClusterIsBusyNotInfeasible) {
  Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  Occupy(cluster, "n[001-006]");
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(4), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kBusy);
  EXPECT_EQ(result.reason, "4 nodes needed, 2 of 8 free now (0 down, 0 drained, 6 busy)");
  EXPECT_TRUE(result.placement.grants.empty());
}

TEST(GangAllocatorTest, NeverPartial) {
  Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  Occupy(cluster, "n[001-005]");
  GangAllocator allocator(cluster.topology);
  EXPECT_EQ(allocator.Place(Nodes(4), cluster.pool).outcome, Outcome::kBusy);
  EXPECT_EQ(allocator.Place(Nodes(3), cluster.pool).outcome, Outcome::kPlaced);
}

TEST(GangAllocatorTest, SpansTheFewestLeaves) {
  // Leaves with 4, 1, 3 and 2 free nodes under one spine: 5 nodes fit in two
  // leaves (4+1 or 3+2), and the tight pick keeps the 4-node leaf whole.
  Cluster cluster = ClusterBuilder().Leaves(4).NodesPerLeaf(4).Build();
  Occupy(cluster, "n[005-007],n009,n[013-014]");
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(5), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(result.placement.leaves.size(), 2U);
  EXPECT_EQ(cluster.LeafNames(result.placement), (std::vector<std::string>{"leaf2", "leaf3"}));
}

TEST(GangAllocatorTest, PrefersTheLowestSwitch) {
  // Two pods of two leaves. Pod 0 holds 6 free nodes, pod 1 holds 5 spread
  // 4+1 elsewhere; a 5-node job stays inside one pod.
  Cluster cluster = ClusterBuilder().Leaves(4).NodesPerLeaf(4).Pods(2).Build();
  Occupy(cluster, "n[001-002],n[012],n[013-016]");
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(5), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.topology.GetSwitch(result.placement.domain).name, "pod0");
  EXPECT_EQ(result.placement.level, 1);
}

TEST(GangAllocatorTest, TightestLeafKeepsEmptyLeavesWhole) {
  Cluster cluster = ClusterBuilder().Leaves(3).NodesPerLeaf(4).Build();
  Occupy(cluster, "n[005-006]");  // leaf1 has 2 free
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(2), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "n[007-008]");
}

TEST(GangAllocatorTest, SwitchesLimitIsHonoured) {
  Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(6);
  request.max_leaves = 1;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_NE(result.reason.find("--switches=1"), std::string::npos) << result.reason;
  request.max_leaves = 2;
  EXPECT_EQ(allocator.Place(request, cluster.pool).outcome, Outcome::kPlaced);
}

TEST(GangAllocatorTest, DisconnectedTreesCannotShareAJob) {
  Cluster cluster = testing::ClusterFromTopology(
      "SwitchName=a Nodes=x[1-4]\nSwitchName=b Nodes=y[1-4]\n", config::DefaultNodeSpec(""));
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(6), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_NE(result.reason.find("no common ancestor"), std::string::npos) << result.reason;
}

TEST(GangAllocatorTest, ResourcesPerNodeAreGranted) {
  Cluster cluster =
      ClusterBuilder().Leaves(1).NodesPerLeaf(2).GpusPerNode(8).CpusPerNode(64).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(2);
  request.tasks_per_node = 2;
  request.cpus_per_task = 8;
  request.gpus_per_node = 2;
  request.memory_mb_per_node = 1000;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  for (const NodeGrant& g : result.placement.grants) {
    EXPECT_EQ(g.cpus, 16);
    EXPECT_EQ(g.memory_mb, 1000);
    EXPECT_EQ(g.gpus, 0b11U);
  }
}

// -O/--overcommit: a node holds one task's CPUs however many tasks it runs,
// so 128 tasks fit a 64-CPU node that without it could never hold them.
TEST(GangAllocatorTest, OvercommitHoldsOneTasksCpusPerNode) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).CpusPerNode(64).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(1);
  request.tasks_per_node = 128;
  request.cpus_per_task = 2;
  EXPECT_EQ(allocator.Place(request, cluster.pool).outcome, Outcome::kInfeasible);
  request.overcommit = true;
  EXPECT_EQ(CpusPerNode(request), 2);
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(result.placement.grants[0].cpus, 2);
}

TEST(GangAllocatorTest, SharedNodesPackBeforeEmptyOnes) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).GpusPerNode(8).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(1);
  request.gpus_per_node = 4;
  PlacementResult first = allocator.Place(request, cluster.pool);
  ASSERT_EQ(first.outcome, Outcome::kPlaced);
  cluster.pool.Commit(first.placement.grants);
  PlacementResult second = allocator.Place(request, cluster.pool);
  ASSERT_EQ(second.outcome, Outcome::kPlaced);
  EXPECT_EQ(second.placement.grants[0].node, first.placement.grants[0].node);
  EXPECT_EQ(second.placement.grants[0].gpus & first.placement.grants[0].gpus, 0U);
}

TEST(GangAllocatorTest, ExclusiveTakesWholeIdleNodes) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).GpusPerNode(8).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest small = Nodes(1);
  small.gpus_per_node = 1;
  const PlacementResult first = allocator.Place(small, cluster.pool);
  cluster.pool.Commit(first.placement.grants);
  GangRequest exclusive = Nodes(1);
  exclusive.exclusivity = Exclusivity::kExclusive;
  const PlacementResult result = allocator.Place(exclusive, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced);
  EXPECT_NE(result.placement.grants[0].node, first.placement.grants[0].node);
  EXPECT_EQ(result.placement.grants[0].gpus, 0xffU);
  EXPECT_EQ(result.placement.grants[0].cpus, 64);
  exclusive.nodes = 2;
  EXPECT_EQ(allocator.Place(exclusive, cluster.pool).outcome, Outcome::kBusy);
}

TEST(GangAllocatorTest, TooManyGpusPerNodeIsInfeasibleWithTheReason) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).GpusPerNode(8).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(1);
  request.gpus_per_node = 16;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason,
            "only 0 of the 2 nodes of the cluster offer 16 GPUs, 1 CPUs per node; "
            "the job asks for 1");
}

TEST(GangAllocatorTest, DownAndDrainedNodesWait) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
  cluster.pool.SetCondition(cluster.Node("n001"), NodeCondition::kDown);
  cluster.pool.SetCondition(cluster.Node("n002"), NodeCondition::kDrained);
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(1), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kBusy);
  EXPECT_EQ(result.reason, "1 nodes needed, 0 of 2 free now (1 down, 1 drained, 0 busy)");
}

TEST(GangAllocatorTest, RequiredAndExcludedNodes) {
  Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(3);
  request.required_nodes = cluster.Nodes("n[005,008]");
  request.excluded_nodes = cluster.Nodes("n006");
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "n[005,007-008]");

  request.required_nodes = cluster.Nodes("n001,n008");
  request.nodes = 2;
  const PlacementResult spread = allocator.Place(request, cluster.pool);
  ASSERT_EQ(spread.outcome, Outcome::kPlaced) << spread.reason;
  EXPECT_EQ(cluster.Names(spread.placement), "n[001,008]");

  Occupy(cluster, "n001");
  const PlacementResult busy = allocator.Place(request, cluster.pool);
  EXPECT_EQ(busy.outcome, Outcome::kBusy);
  EXPECT_EQ(busy.reason, "required node n001 is busy");
}

TEST(GangAllocatorTest, FeaturesAndPartitions) {
  testing::Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(4).Build();
  cluster.nodes[2].features = {"h100"};
  cluster.nodes[3].features = {"h100"};
  config::PartitionSpec part;
  part.name = "gpu";
  part.nodes = {"n001", "n002", "n003"};
  NodePool pool =
      NodePool::Create(cluster.topology, cluster.nodes, std::vector<config::PartitionSpec>{part})
          .value();
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(1);
  request.features = {"h100"};
  request.partition = pool.FindPartition("gpu");
  PlacementResult result = allocator.Place(request, pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.topology.NodeName(result.placement.grants[0].node), "n003");
  request.nodes = 2;
  EXPECT_EQ(allocator.Place(request, pool).outcome, Outcome::kInfeasible);
  request.features = {"a100"};
  result = allocator.Place(request, pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason, "no node has all of the features a100; known features: h100");
}

TEST(GangAllocatorTest, JobThatFitsABlockLandsInOneBlock) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  Occupy(cluster, "gb[001-002]");  // nvl72-1 has 16 free; the others 18
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(16), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(result.placement.groups.size(), 1U);
  EXPECT_EQ(cluster.Names(result.placement), "gb[003-018]");
}

TEST(GangAllocatorTest, LargerJobsUseWholeSegmentsInsideBlocks) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  Occupy(cluster, "gb[001-010]");  // nvl72-1 has 8 free
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(36);
  request.segment = 9;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  // 36 nodes as four 9-node segments: two whole blocks under one IB leaf.
  std::map<topology::BlockId, int> per_block;
  for (const NodeGrant& g : result.placement.grants) ++per_block[cluster.topology.BlockOf(g.node)];
  for (const auto& [block, count] : per_block) EXPECT_EQ(count % 9, 0) << block;
  EXPECT_EQ(result.placement.groups.size(), 2U);
  EXPECT_EQ(result.placement.leaves.size(), 1U);
}

TEST(GangAllocatorTest, ExclusiveTopoTakesOnlyBlocksNoOtherJobIsIn) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  Occupy(cluster, "gb001,gb019,gb037,gb055,gb073,gb091,gb109");  // one node of blocks 1-7
  GangAllocator allocator(cluster.topology);
  GangRequest topo = Nodes(4);
  topo.exclusivity = Exclusivity::kTopo;
  const PlacementResult placed = allocator.Place(topo, cluster.pool);
  ASSERT_EQ(placed.outcome, Outcome::kPlaced) << placed.reason;
  EXPECT_EQ(cluster.Names(placed.placement), "gb[127-130]");  // nvl72-8, the one idle block
  for (const NodeGrant& g : placed.placement.grants) EXPECT_TRUE(g.holds_group);
  cluster.pool.Commit(placed.placement.grants);
  EXPECT_TRUE(
      cluster.pool.GroupHeld(cluster.topology.GroupOf(*cluster.topology.FindNode("gb144"))));

  // A second one finds no idle block, and says why.
  const PlacementResult second = allocator.Place(topo, cluster.pool);
  EXPECT_EQ(second.outcome, Outcome::kBusy);
  EXPECT_NE(second.reason.find("--exclusive=topo counts only blocks with no other job in them"),
            std::string::npos)
      << second.reason;
  // Nor may any other job use the 14 idle nodes of the held block.
  GangRequest rest = Nodes(1);
  rest.required_nodes = {*cluster.topology.FindNode("gb144")};
  const PlacementResult closed = allocator.Place(rest, cluster.pool);
  EXPECT_EQ(closed.outcome, Outcome::kBusy);
  EXPECT_EQ(closed.reason,
            "required node gb144 is in block nvl72-8, which another job holds whole "
            "(--exclusive=topo)");
  GangRequest small = Nodes(17);
  const PlacementResult elsewhere = allocator.Place(small, cluster.pool);
  ASSERT_EQ(elsewhere.outcome, Outcome::kPlaced) << elsewhere.reason;
  for (const NodeGrant& g : elsewhere.placement.grants) {
    EXPECT_NE(cluster.topology.BlockOf(g.node),
              cluster.topology.BlockOf(placed.placement.grants[0].node));
  }

  // Released, the block is open again.
  cluster.pool.Release(placed.placement.grants);
  EXPECT_EQ(cluster.pool.HeldGroupCount(), 0);
  EXPECT_EQ(allocator.Place(rest, cluster.pool).outcome, Outcome::kPlaced);
}

// The GB200 layout with BlockSizes: base blocks of 18, aggregates of 2 and 4.
Cluster Gb200WithBlockSizes(std::string_view sizes) {
  return testing::ClusterFromTopology(
      testing::ReadData("topologies/gb200-nvl72.conf") + fmt::format("BlockSizes={}\n", sizes),
      config::DefaultNodeSpec(""));
}

TEST(GangAllocatorTest, BlockSizesKeepAJobInOneAggregate) {
  Cluster cluster = Gb200WithBlockSizes("18,72");
  // Blocks 4 and 5 have 10 free each, the others none: 20 nodes would fit
  // blocks 4+5, but they are in different aggregates of 72 (1-4, 5-8).
  Occupy(cluster, "gb[001-062],gb[083-144]");
  GangAllocator allocator(cluster.topology);
  const PlacementResult busy = allocator.Place(Nodes(20), cluster.pool);
  EXPECT_EQ(busy.outcome, Outcome::kBusy);
  EXPECT_EQ(busy.reason,
            "20 nodes needed within one block aggregate of BlockSizes=18,72, but none has that "
            "many free now (most: 10 in nvl72-1 to nvl72-4)");
  // Without BlockSizes the same job spans the two blocks.
  Cluster plain = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                               config::DefaultNodeSpec(""));
  Occupy(plain, "gb[001-062],gb[083-144]");
  GangAllocator free_allocator(plain.topology);
  EXPECT_EQ(free_allocator.Place(Nodes(20), plain.pool).outcome, Outcome::kPlaced);
  // 10 nodes fit one base block: placed there, in topology order.
  const PlacementResult small = allocator.Place(Nodes(10), cluster.pool);
  ASSERT_EQ(small.outcome, Outcome::kPlaced) << small.reason;
  EXPECT_EQ(small.placement.groups.size(), 1U);
}

TEST(GangAllocatorTest, BlockSizesBoundTheLargestJobButNotSegments) {
  Cluster cluster = Gb200WithBlockSizes("18,36");
  GangAllocator allocator(cluster.topology);
  const PlacementResult result = allocator.Place(Nodes(54), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason,
            "54 nodes are more than the largest block (BlockSizes=18,36 allows 36); ask for at "
            "most 36 nodes, or give --segment=S to place the job in pieces of S nodes");
  GangRequest pieces = Nodes(54);
  pieces.segment = 18;
  const PlacementResult placed = allocator.Place(pieces, cluster.pool);
  ASSERT_EQ(placed.outcome, Outcome::kPlaced) << placed.reason;
  EXPECT_EQ(placed.placement.groups.size(), 3U);
}

TEST(GangAllocatorTest, SpreadSegmentsTakeOneSegmentPerBlock) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(8);
  request.segment = 4;
  const PlacementResult packed = allocator.Place(request, cluster.pool);
  ASSERT_EQ(packed.outcome, Outcome::kPlaced) << packed.reason;
  EXPECT_EQ(packed.placement.groups.size(), 1U);
  request.spread_segments = true;
  const PlacementResult spread = allocator.Place(request, cluster.pool);
  ASSERT_EQ(spread.outcome, Outcome::kPlaced) << spread.reason;
  EXPECT_EQ(spread.placement.groups.size(), 2U);
  EXPECT_EQ(cluster.Names(spread.placement), "gb[001-004,019-022]");
  request.nodes = 40;  // ten segments, eight blocks
  EXPECT_EQ(allocator.Place(request, cluster.pool).outcome, Outcome::kInfeasible);
}

TEST(GangAllocatorTest, NodeRanksFollowTheTopologyNotTheNames) {
  // Two blocks whose names interleave: a 4-node job in segments of 2 gets
  // each segment's nodes as consecutive ranks.
  Cluster cluster = testing::ClusterFromTopology(
      "SwitchName=leaf Nodes=n[1-4]\n"
      "BlockName=odd Nodes=n[1,3]\n"
      "BlockName=even Nodes=n[2,4]\n",
      config::DefaultNodeSpec(""));
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(4);
  request.segment = 2;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  std::vector<std::string> ranks;
  for (const NodeGrant& g : result.placement.grants)
    ranks.push_back(cluster.topology.NodeName(g.node));
  EXPECT_EQ(ranks, (std::vector<std::string>{"n1", "n3", "n2", "n4"}));
  const absl::StatusOr<PlacementReport> report =
      CheckPlacement(cluster.topology, request, result.placement.grants);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(FormatPlacement(cluster.topology, *report),
            "2 segments of 2 nodes (n[1,3] in odd, n[2,4] in even); blocks odd,even; leaves leaf; "
            "at most 2 hops (under leaf)");
}

TEST(PlacementCheckTest, ASegmentAcrossTwoBlocksIsRefused) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  GangRequest request = Nodes(36);
  request.segment = 18;
  // 17 + 1 in the first segment, as a buggy allocator could give.
  std::vector<NodeGrant> grants;
  for (const NodeId n : cluster.Nodes("gb[002-037]")) grants.push_back({.node = n});
  const absl::StatusOr<PlacementReport> report = CheckPlacement(cluster.topology, request, grants);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "placement check: segment 1 (gb[002-019]) spans nvl72-1 and nvl72-2");
  grants.pop_back();
  EXPECT_EQ(CheckPlacement(cluster.topology, request, grants).status().message(),
            "placement check: 35 nodes placed for a job of 36");
  grants.push_back(grants.front());
  EXPECT_EQ(CheckPlacement(cluster.topology, request, grants).status().message(),
            "placement check: node gb002 is placed twice");
}

TEST(PlacementCheckTest, WorstHopsCountLinksOverTheTree) {
  Cluster cluster = testing::ClusterFromTopology(testing::ReadData("topologies/gb200-nvl72.conf"),
                                                 config::DefaultNodeSpec(""));
  const auto hops = [&](const std::string& hostlist) {
    std::vector<NodeGrant> grants;
    for (const NodeId n : cluster.Nodes(hostlist)) grants.push_back({.node = n});
    return DescribePlacement(cluster.topology, grants, 0).worst_hops;
  };
  EXPECT_EQ(hops("gb001"), 0);
  EXPECT_EQ(hops("gb[001-036]"), 2);
  EXPECT_EQ(hops("gb[001,037]"), 4);
}

TEST(GangAllocatorTest, GpusComeFromOneLocalityGroup) {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(1).GpusPerNode(8).Build();
  const NodeId node = cluster.Node("n001");
  ASSERT_TRUE(cluster.pool.SetGpuGroups(node, {0x0f, 0xf0}).ok());
  // Take GPUs 0 and 4: both groups now have three free.
  const NodeGrant taken{node, 1, 0, 0x11};
  cluster.pool.Commit({&taken, 1});
  GangAllocator allocator(cluster.topology);
  GangRequest request = Nodes(1);
  request.gpus_per_node = 3;
  const PlacementResult result = allocator.Place(request, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced);
  EXPECT_EQ(result.placement.grants[0].gpus, 0x0eU);
}

TEST(ChooseGpusTest, BestFitGroupThenFullestGroups) {
  NodeCapacity capacity;
  capacity.gpus = 8;
  capacity.gpu_groups = {0x0f, 0xf0};
  EXPECT_EQ(ChooseGpus(capacity, 0xff, 4), 0x0fU);
  EXPECT_EQ(ChooseGpus(capacity, 0xf1, 1), 0x01U);  // the group with one free
  EXPECT_EQ(ChooseGpus(capacity, 0x73, 5), 0x73U);
  EXPECT_EQ(ChooseGpus(capacity, 0x03, 3), 0U);
}

TEST(ValidateGangRequestTest, NamesTheFieldAndTheFix) {
  GangRequest request;
  request.nodes = 0;
  EXPECT_EQ(ValidateGangRequest(request).message(), "nodes is 0; ask for at least 1 node (-N 1)");
  request.nodes = 10;
  request.segment = 4;
  EXPECT_EQ(ValidateGangRequest(request).message(),
            "10 nodes do not split into segments of 4; ask for a multiple of 4 nodes or another "
            "--segment");
  request.segment.reset();
  request.cpus_per_task = -1;
  EXPECT_FALSE(ValidateGangRequest(request).ok());
}

}  // namespace
}  // namespace cohort::alloc
