// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/binding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cohort/launch/node_layout.h"

namespace cohort::binding {
namespace {

using layout::Core;
using layout::NodeLayout;
using Ints = std::vector<int>;

// Hand-built nodes. PUs are numbered as Linux numbers x86 threads: thread t
// of core c (counted over the whole node) is PU t * cores + c, so a core's
// siblings are far apart.
class LayoutBuilder {
 public:
  LayoutBuilder& Numa(int count, int cores_each, int threads) {
    numa_ = count;
    cores_ = cores_each;
    threads_ = threads;
    return *this;
  }
  LayoutBuilder& GpuNuma(Ints numa) {
    gpu_numa_ = std::move(numa);
    return *this;
  }
  LayoutBuilder& Nic(std::string name, int numa) {
    nics_.push_back({std::move(name), numa});
    return *this;
  }
  [[nodiscard]] NodeLayout Build() const {
    NodeLayout layout;
    layout.sockets = numa_;
    const int total = numa_ * cores_;
    for (int n = 0; n < numa_; ++n) {
      layout::NumaNode node{.os_index = n, .memory_mb = 1000, .cores = {}};
      for (int c = n * cores_; c < (n + 1) * cores_; ++c) {
        Core core;
        for (int t = 0; t < threads_; ++t) core.pus.push_back(t * total + c);
        std::sort(core.pus.begin(), core.pus.end());
        node.cores.push_back(core);
      }
      layout.numa_nodes.push_back(node);
    }
    layout.gpus = layout::ConfiguredGpus(static_cast<int>(gpu_numa_.size()), gpu_numa_);
    layout.nics = nics_;
    return layout;
  }

 private:
  int numa_ = 2;
  int cores_ = 8;
  int threads_ = 2;
  Ints gpu_numa_;
  std::vector<layout::Nic> nics_;
};

// A DGX-like node in small: 2 NUMA nodes of 8 cores x 2 threads, 4 GPUs and
// 2 NICs on each.
NodeLayout SmallDgx() {
  return LayoutBuilder()
      .Numa(2, 8, 2)
      .GpuNuma({0, 0, 0, 0, 1, 1, 1, 1})
      .Nic("mlx5_0", 0)
      .Nic("mlx5_1", 0)
      .Nic("mlx5_2", 1)
      .Nic("mlx5_3", 1)
      .Build();
}

std::uint64_t Mask(const Ints& gpus) {
  std::uint64_t mask = 0;
  for (const int g : gpus) mask |= std::uint64_t{1} << g;
  return mask;
}

BindingRequest Request(std::uint64_t gpus, int ranks, BindingOptions options = {}) {
  return {.gpus = gpus, .ranks = ranks, .cpus_per_task = 1, .options = options};
}

std::vector<RankBinding> MustPlan(const NodeLayout& layout, const BindingRequest& request) {
  absl::StatusOr<std::vector<RankBinding>> plan = PlanBinding(layout, request);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : std::vector<RankBinding>{};
}

std::string Refusal(const NodeLayout& layout, const BindingRequest& request) {
  const absl::Status status = CheckBinding(layout, request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

// The NUMA node of each PU, and the PUs of each core.
std::map<int, int> NumaOfPu(const NodeLayout& layout) {
  std::map<int, int> numa;
  for (const auto& node : layout.numa_nodes) {
    for (const Core& core : node.cores) {
      for (const int pu : core.pus) numa[pu] = node.os_index;
    }
  }
  return numa;
}

// Whole cores of `cpus` (every thread of the core in the set).
int WholeCores(const NodeLayout& layout, const Ints& cpus) {
  const std::set<int> set(cpus.begin(), cpus.end());
  int whole = 0;
  for (const auto& node : layout.numa_nodes) {
    for (const Core& core : node.cores) {
      whole +=
          std::all_of(core.pus.begin(), core.pus.end(), [&](int pu) { return set.contains(pu); });
    }
  }
  return whole;
}

// The invariants of a cores plan: CPUs on the rank's NUMA nodes, none given
// twice.
void ExpectDisjointAndLocal(const NodeLayout& layout, const std::vector<RankBinding>& plan) {
  const std::map<int, int> numa = NumaOfPu(layout);
  std::set<int> seen;
  for (const RankBinding& rank : plan) {
    EXPECT_FALSE(rank.cpus.empty()) << "rank " << rank.local_rank;
    for (const int pu : rank.cpus) {
      EXPECT_TRUE(seen.insert(pu).second) << "PU " << pu << " given twice";
      ASSERT_TRUE(numa.contains(pu));
      EXPECT_TRUE(std::find(rank.numa_nodes.begin(), rank.numa_nodes.end(), numa.at(pu)) !=
                  rank.numa_nodes.end())
          << "rank " << rank.local_rank << " PU " << pu;
    }
  }
}

// --- One rank per GPU

TEST(BindingTest, OneRankPerGpuSplitsEachNumaNodeEvenly) {
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0xff, 8));
  ASSERT_EQ(plan.size(), 8U);
  for (const RankBinding& rank : plan) {
    const int r = rank.local_rank;
    EXPECT_EQ(rank.gpus, Ints{r});
    // The default (ordered): every GPU visible, the rank's own at LOCAL_RANK.
    EXPECT_EQ(rank.cuda_visible_devices, "0,1,2,3,4,5,6,7");
    EXPECT_EQ(rank.numa_nodes, Ints{r / 4});
    EXPECT_EQ(rank.mem_numa, Ints{r / 4});
    EXPECT_EQ(rank.cpus.size(), 4U) << "8 cores x 2 threads for 4 ranks";
    EXPECT_EQ(WholeCores(layout, rank.cpus), 2);
  }
  // Thread t of core c is PU 16t + c: rank 0 has cores 0 and 1.
  EXPECT_EQ(plan[0].cpus, (Ints{0, 1, 16, 17}));
  EXPECT_EQ(plan[5].cpus, (Ints{10, 11, 26, 27}));
  EXPECT_EQ(plan[0].nics, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(plan[0].nccl_ib_hca, "=mlx5_0,mlx5_1");
  EXPECT_EQ(plan[7].nccl_ib_hca, "=mlx5_2,mlx5_3");
  ExpectDisjointAndLocal(layout, plan);
}

TEST(BindingTest, UnevenCoreCountsGiveTheFirstRanksOneMore) {
  const NodeLayout layout = LayoutBuilder().Numa(1, 8, 1).GpuNuma({0, 0, 0}).Build();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0b111, 3));
  ASSERT_EQ(plan.size(), 3U);
  EXPECT_EQ(plan[0].cpus, (Ints{0, 1, 2}));
  EXPECT_EQ(plan[1].cpus, (Ints{3, 4, 5}));
  EXPECT_EQ(plan[2].cpus, (Ints{6, 7}));
}

TEST(BindingTest, APartialGrantSplitsTheNumaNodeAmongTheJobsRanks) {
  // GPUs 1 and 2 of NUMA node 0: its 8 cores go to the job's 2 ranks.
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({1, 2}), 2));
  ASSERT_EQ(plan.size(), 2U);
  EXPECT_EQ(plan[0].gpus, Ints{1});
  EXPECT_EQ(plan[1].gpus, Ints{2});
  EXPECT_EQ(WholeCores(layout, plan[0].cpus), 4);
  EXPECT_EQ(WholeCores(layout, plan[1].cpus), 4);
  ExpectDisjointAndLocal(layout, plan);
}

// --- Hardware threads only after whole cores

TEST(BindingTest, HardwareThreadsAreSplitOnlyWhenCoresRunOut) {
  const NodeLayout layout = LayoutBuilder().Numa(1, 2, 2).GpuNuma({0, 0, 0, 0}).Build();
  // Two ranks: a whole core each (PUs 0,2 and 1,3).
  std::vector<RankBinding> plan = MustPlan(layout, Request(0b11, 2));
  EXPECT_EQ(plan[0].cpus, (Ints{0, 2}));
  EXPECT_EQ(plan[1].cpus, (Ints{1, 3}));
  // Three ranks on two cores: the first keeps a whole core, the others share
  // one.
  plan = MustPlan(layout, Request(0b111, 3));
  EXPECT_EQ(plan[0].cpus, (Ints{0, 2}));
  EXPECT_EQ(plan[1].cpus, Ints{1});
  EXPECT_EQ(plan[2].cpus, Ints{3});
  ExpectDisjointAndLocal(layout, plan);
  // Four: one thread each.
  plan = MustPlan(layout, Request(0b1111, 4));
  for (const RankBinding& rank : plan) EXPECT_EQ(rank.cpus.size(), 1U);
  ExpectDisjointAndLocal(layout, plan);
}

TEST(BindingTest, CpuBindThreadsTakesOneThreadPerCoreFirst) {
  const NodeLayout layout = LayoutBuilder().Numa(1, 4, 2).GpuNuma({0, 0}).Build();
  BindingOptions options;
  options.cpu = CpuBind::kThreads;
  BindingRequest request = Request(0b11, 2, options);
  request.cpus_per_task = 3;
  const std::vector<RankBinding> plan = MustPlan(layout, request);
  // Rank 0's share is cores 0-1 (PUs 0,4 and 1,5): both first threads, then a
  // sibling.
  EXPECT_EQ(plan[0].cpus, (Ints{0, 1, 4}));
  EXPECT_EQ(plan[1].cpus, (Ints{2, 3, 6}));
  request.cpus_per_task = 1;
  EXPECT_EQ(MustPlan(layout, request)[1].cpus, Ints{2});
}

// --- cpus-per-task

TEST(BindingTest, CpusPerTaskIsTheLeastARankGets) {
  const NodeLayout layout = SmallDgx();  // 16 threads per NUMA node, 4 ranks on each
  BindingRequest request = Request(0xff, 8);
  request.cpus_per_task = 4;
  for (const RankBinding& rank : MustPlan(layout, request)) EXPECT_EQ(rank.cpus.size(), 4U);
  request.cpus_per_task = 5;
  const std::string why = Refusal(layout, request);
  EXPECT_EQ(why,
            "--cpus-per-task=5 but rank 0 gets 4 hardware threads (NUMA "
            "node 0 has 16 for 4 "
            "ranks); lower --cpus-per-task or run fewer ranks per node");
}

TEST(BindingTest, CpusPerTaskAboveTheNumaNodeIsRefused) {
  const NodeLayout layout = SmallDgx();
  BindingRequest request = Request(Mask({0}), 1);
  request.cpus_per_task = 16;
  EXPECT_EQ(MustPlan(layout, request)[0].cpus.size(), 16U);
  request.cpus_per_task = 17;
  EXPECT_NE(Refusal(layout, request).find("NUMA node 0 has 16 for 1 rank)"), std::string::npos);
  // With --cpu-bind=numa the rank has its whole NUMA node, still 16.
  request.options.cpu = CpuBind::kNuma;
  EXPECT_NE(Refusal(layout, request).find("gets 16 hardware threads"), std::string::npos);
}

TEST(BindingTest, MoreRanksThanHardwareThreadsOnANumaNodeAreRefused) {
  const NodeLayout layout = LayoutBuilder().Numa(1, 2, 1).GpuNuma({0, 0, 0}).Build();
  EXPECT_EQ(Refusal(layout, Request(0b111, 3)),
            "3 ranks share NUMA node 0, which has 2 hardware threads; run "
            "fewer ranks per node, use --cpu-bind=none, or let ranks share threads with "
            "-O/--overcommit");
  BindingOptions none;
  none.cpu = CpuBind::kNone;
  EXPECT_TRUE(CheckBinding(layout, Request(0b111, 3, none)).ok());
}

// -O/--overcommit: more ranks than threads take the threads in turn, and a
// rank may get fewer than --cpus-per-task.
TEST(BindingTest, OvercommittedRanksShareThreadsInTurn) {
  const NodeLayout layout = LayoutBuilder().Numa(1, 2, 1).GpuNuma({0, 0, 0}).Build();
  BindingRequest request = Request(0b111, 5);
  request.overcommit = true;
  const std::vector<RankBinding> plan = MustPlan(layout, request);
  ASSERT_EQ(plan.size(), 5U);
  for (const RankBinding& rank : plan) ASSERT_EQ(rank.cpus.size(), 1U) << rank.local_rank;
  EXPECT_NE(plan[0].cpus, plan[1].cpus);
  EXPECT_EQ(plan[0].cpus, plan[2].cpus);
  EXPECT_EQ(plan[1].cpus, plan[3].cpus);
  EXPECT_EQ(plan[0].cpus, plan[4].cpus);
  request.cpus_per_task = 4;
  EXPECT_EQ(MustPlan(layout, request).size(), 5U) << "each rank binds to what it has";
  request.overcommit = false;
  EXPECT_FALSE(CheckBinding(layout, request).ok());
}

// --- --gpu-bind

TEST(BindingTest, ClosestGivesEachRankAShareOfTheGpusOnOneNumaNode) {
  const NodeLayout layout = SmallDgx();
  BindingOptions closest;
  closest.gpu.kind = GpuBindKind::kClosest;
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0xff, 2, closest));
  EXPECT_EQ(plan[0].gpus, (Ints{0, 1, 2, 3}));
  EXPECT_EQ(plan[0].cuda_visible_devices, "0,1,2,3");
  EXPECT_EQ(plan[1].cuda_visible_devices, "4,5,6,7");
  EXPECT_EQ(plan[0].cpus.size(), 16U) << "the whole of NUMA node 0";
  EXPECT_EQ(plan[1].numa_nodes, Ints{1});
}

TEST(BindingTest, OrderedPutsEachRanksOwnGpuAtItsLocalRank) {
  // A rank per GPU, GPUs 2-5 of a DGX (2-3 on NUMA node 0, 4-5 on 1): every
  // rank sees the same list, rank r's GPU at position r, so
  // set_device(LOCAL_RANK) picks it; CPUs follow that GPU as with closest.
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({5, 2, 3, 4}), 4));
  ASSERT_EQ(plan.size(), 4U);
  for (const RankBinding& rank : plan) {
    EXPECT_EQ(rank.cuda_visible_devices, "2,3,4,5");
    EXPECT_EQ(rank.gpus.size(), 1U);
  }
  EXPECT_EQ(plan[2].gpus, Ints{4});
  EXPECT_EQ(plan[2].numa_nodes, Ints{1});
}

TEST(BindingTest, OrderedKeepsEachRanksOwnGpusWhenRanksAndGpusDiffer) {
  // 2 ranks of 4 GPUs each: each sees its own, as cuda:0-3 are all its.
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> pairs = MustPlan(layout, Request(0xff, 2));
  EXPECT_EQ(pairs[0].cuda_visible_devices, "0,1,2,3");
  EXPECT_EQ(pairs[1].cuda_visible_devices, "4,5,6,7");
  // 4 ranks sharing 2 GPUs: each sees the one it shares.
  const std::vector<RankBinding> shared = MustPlan(layout, Request(Mask({0, 4}), 4));
  EXPECT_EQ(shared[1].cuda_visible_devices, "0");
  EXPECT_EQ(shared[3].cuda_visible_devices, "4");
}

TEST(BindingTest, ClosestKeepsInterleavedGpusWithTheirNumaNode) {
  const NodeLayout layout = LayoutBuilder().Numa(2, 4, 1).GpuNuma({0, 1, 0, 1}).Build();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0b1111, 2));
  EXPECT_EQ(plan[0].gpus, (Ints{0, 2}));
  EXPECT_EQ(plan[1].gpus, (Ints{1, 3}));
  EXPECT_EQ(plan[0].numa_nodes, Ints{0});
  EXPECT_EQ(plan[1].numa_nodes, Ints{1});
}

TEST(BindingTest, ClosestWithMoreRanksThanGpusLetsNeighboursShare) {
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({0, 4}), 4));
  EXPECT_EQ(plan[0].gpus, Ints{0});
  EXPECT_EQ(plan[1].gpus, Ints{0});
  EXPECT_EQ(plan[2].gpus, Ints{4});
  EXPECT_EQ(plan[3].gpus, Ints{4});
  ExpectDisjointAndLocal(layout, plan);
}

TEST(BindingTest, SingleBindsNRanksToEachGpu) {
  const NodeLayout layout = SmallDgx();
  BindingOptions options;
  options.gpu = GpuBind{GpuBindKind::kSingle, 2};
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({0, 5}), 4, options));
  EXPECT_EQ(plan[0].cuda_visible_devices, "0");
  EXPECT_EQ(plan[1].cuda_visible_devices, "0");
  EXPECT_EQ(plan[2].cuda_visible_devices, "5");
  EXPECT_EQ(plan[3].cuda_visible_devices, "5");
  EXPECT_EQ(plan[3].numa_nodes, Ints{1});
  ExpectDisjointAndLocal(layout, plan);
  // single:1 never gives a rank two GPUs, unlike closest.
  options.gpu.ranks_per_gpu = 1;
  const std::vector<RankBinding> one = MustPlan(layout, Request(0xff, 2, options));
  EXPECT_EQ(one[0].gpus, Ints{0});
  EXPECT_EQ(one[1].gpus, Ints{1});
}

TEST(BindingTest, SingleRefusesMoreRanksThanItsGpusTake) {
  const NodeLayout layout = SmallDgx();
  BindingOptions options;
  options.gpu = GpuBind{GpuBindKind::kSingle, 1};
  EXPECT_EQ(Refusal(layout, Request(0xff, 9, options)),
            "--gpu-bind=single:1 puts at most 1 rank on each GPU: 9 ranks need 9 "
            "GPUs, the job "
            "has 8 on this node; ask for more GPUs, run fewer ranks per node, or use "
            "--gpu-bind=single:2");
  EXPECT_EQ(Refusal(layout, Request(0, 1, options)),
            "--gpu-bind=single:1 binds each rank to a GPU, but the job has no "
            "GPU on this node; "
            "ask for GPUs (--gpus-per-node) or use --gpu-bind=none");
}

TEST(BindingTest, NoneShowsEveryRankAllTheJobsGpus) {
  const NodeLayout layout = SmallDgx();
  BindingOptions options;
  options.gpu = GpuBind{GpuBindKind::kNone, 1};
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({3, 4}), 2, options));
  for (const RankBinding& rank : plan) {
    EXPECT_EQ(rank.gpus, (Ints{3, 4}));
    EXPECT_EQ(rank.cuda_visible_devices, "3,4");
  }
  // CPUs still follow the GPU each rank would have had.
  EXPECT_EQ(plan[0].numa_nodes, Ints{0});
  EXPECT_EQ(plan[1].numa_nodes, Ints{1});
}

TEST(BindingTest, JobNumberingCountsTheJobsGpusFromZero) {
  const NodeLayout layout = SmallDgx();
  BindingOptions options;
  options.numbering = GpuNumbering::kJob;
  options.gpu.kind = GpuBindKind::kClosest;
  const std::vector<RankBinding> plan = MustPlan(layout, Request(Mask({4, 5, 6, 7}), 2, options));
  EXPECT_EQ(plan[0].gpus, (Ints{4, 5}));
  EXPECT_EQ(plan[0].cuda_visible_devices, "0,1");
  EXPECT_EQ(plan[1].cuda_visible_devices, "2,3");
  // Ordered, a rank per GPU: every rank sees the job's 4, by job number.
  options.gpu.kind = GpuBindKind::kOrdered;
  EXPECT_EQ(MustPlan(layout, Request(Mask({4, 5, 6, 7}), 4, options))[1].cuda_visible_devices,
            "0,1,2,3");
  options.gpu.kind = GpuBindKind::kNone;
  EXPECT_EQ(MustPlan(layout, Request(Mask({4, 5, 6, 7}), 2, options))[1].cuda_visible_devices,
            "0,1,2,3");
}

// --- Ranks without GPUs, GPUs without locality

TEST(BindingTest, RanksWithoutGpusTakeNumaNodesInTurn) {
  const NodeLayout layout = SmallDgx();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0, 4));
  ASSERT_EQ(plan.size(), 4U);
  EXPECT_EQ(plan[0].numa_nodes, Ints{0});
  EXPECT_EQ(plan[1].numa_nodes, Ints{1});
  EXPECT_EQ(plan[2].numa_nodes, Ints{0});
  EXPECT_EQ(plan[3].numa_nodes, Ints{1});
  for (const RankBinding& rank : plan) {
    EXPECT_TRUE(rank.gpus.empty());
    EXPECT_EQ(rank.cuda_visible_devices, "");
    EXPECT_EQ(rank.cpus.size(), 8U);
  }
  ExpectDisjointAndLocal(layout, plan);
}

TEST(BindingTest, GpusOfUnknownLocalitySpreadLikeRanksWithoutGpus) {
  const NodeLayout layout = LayoutBuilder().Numa(2, 4, 1).GpuNuma({-1, -1}).Build();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0b11, 2));
  EXPECT_EQ(plan[0].gpus, Ints{0});
  EXPECT_EQ(plan[0].numa_nodes, Ints{0});
  EXPECT_EQ(plan[1].numa_nodes, Ints{1});
  ExpectDisjointAndLocal(layout, plan);
}

// --- --cpu-bind, --mem-bind, NICs

TEST(BindingTest, NumaAndNoneBindings) {
  const NodeLayout layout = SmallDgx();
  BindingOptions options;
  options.cpu = CpuBind::kNuma;
  options.mem = MemBind::kNone;
  std::vector<RankBinding> plan = MustPlan(layout, Request(0xff, 8, options));
  EXPECT_EQ(plan[0].cpus, plan[3].cpus) << "ranks of one NUMA node share it";
  EXPECT_EQ(plan[0].cpus.size(), 16U);
  EXPECT_TRUE(plan[0].mem_numa.empty());
  options.cpu = CpuBind::kNone;
  plan = MustPlan(layout, Request(0xff, 8, options));
  EXPECT_TRUE(plan[0].cpus.empty());
  EXPECT_EQ(plan[0].numa_nodes, Ints{0});
}

TEST(BindingTest, RanksFarFromEveryNicGetThemAll) {
  const NodeLayout layout =
      LayoutBuilder().Numa(2, 2, 1).GpuNuma({0, 1}).Nic("mlx5_0", 0).Nic("mlx5_1", -1).Build();
  const std::vector<RankBinding> plan = MustPlan(layout, Request(0b11, 2));
  EXPECT_EQ(plan[0].nccl_ib_hca, "=mlx5_0");
  EXPECT_EQ(plan[1].nccl_ib_hca, "=mlx5_0,mlx5_1");
  EXPECT_EQ(MustPlan(LayoutBuilder().Build(), Request(0, 1))[0].nccl_ib_hca, "")
      << "no NIC known: leave NCCL to choose";
}

// --- Core grants: jobs that share a node never share a core

// 2 NUMA nodes of 4 cores x 2 threads: core c has PUs c and c + 8; GPUs 0-1
// on NUMA node 0, 2-3 on NUMA node 1.
NodeLayout FourCoreNumas() { return LayoutBuilder().Numa(2, 4, 2).GpuNuma({0, 0, 1, 1}).Build(); }

Ints Joined(const Ints& a, const Ints& b) {
  Ints out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(CpuGrantTest, JobsTakeWholeFreeCoresNearTheirGpus) {
  const NodeLayout layout = FourCoreNumas();
  const CpuGrant a = GrantCpus(layout, {}, {}, 0b0001, 4);
  EXPECT_EQ(a.pus, (Ints{0, 1, 8, 9}));
  EXPECT_EQ(a.shared_cores, 0);
  const CpuGrant b = GrantCpus(layout, {}, a.pus, 0b0010, 4);
  EXPECT_EQ(b.pus, (Ints{2, 3, 10, 11})) << "the rest of GPU 1's NUMA node";
  const CpuGrant c = GrantCpus(layout, {}, Joined(a.pus, b.pus), 0b0001, 3);
  EXPECT_EQ(c.pus, (Ints{4, 5, 12, 13})) << "3 threads take 2 whole cores, from NUMA node 1 "
                                            "once node 0 is full";
  const CpuGrant far = GrantCpus(layout, {}, {}, 0b1000, 2);
  EXPECT_EQ(far.pus, (Ints{4, 12})) << "GPU 3's NUMA node first";
  EXPECT_EQ(GrantCpus(layout, {}, {}, 0, 0).pus, (Ints{0, 8})) << "at least one core";
}

TEST(CpuGrantTest, StepsReuseTheirJobsCoresAndOnlyAFullNodeShares) {
  const NodeLayout layout = FourCoreNumas();
  const Ints job = {2, 3, 10, 11};
  const Ints others = {0, 1, 8, 9};
  EXPECT_EQ(GrantCpus(layout, job, others, 0b0001, 2).pus, (Ints{2, 10}))
      << "a step takes its job's cores before free ones";
  EXPECT_EQ(GrantCpus(layout, job, others, 0b0001, 6).pus, (Ints{2, 3, 4, 10, 11, 12}));
  Ints all(16);
  for (int i = 0; i < 16; ++i) all[static_cast<std::size_t>(i)] = i;
  const CpuGrant full = GrantCpus(layout, {}, all, 0b0100, 2);
  EXPECT_EQ(full.pus, (Ints{4, 12}));
  EXPECT_EQ(full.shared_cores, 1);
}

TEST(CpuGrantTest, RanksSplitOnlyTheGrantedCores) {
  const NodeLayout layout = FourCoreNumas();
  const CpuGrant grant = GrantCpus(layout, {}, Ints{0, 1, 8, 9}, 0b0011, 4);
  const NodeLayout kept = KeepCpus(layout, grant.pus);
  ASSERT_EQ(kept.numa_nodes[0].cores.size(), 2U);
  EXPECT_EQ(kept.numa_nodes[0].cores[0].pus, (Ints{2, 10}));
  EXPECT_TRUE(kept.numa_nodes[1].cores.empty());
  EXPECT_EQ(kept.gpus.size(), 4U);
  const std::vector<RankBinding> plan = MustPlan(kept, Request(0b0011, 2));
  EXPECT_EQ(plan[0].cpus, (Ints{2, 10}));
  EXPECT_EQ(plan[1].cpus, (Ints{3, 11}));
  EXPECT_EQ(KeepCpus(layout, Ints{0}).numa_nodes[0].cores[0].pus, Ints{0})
      << "only the kept threads of a core";
}

// --- Malformed requests

TEST(BindingTest, MalformedRequestsAreRefused) {
  const NodeLayout layout = SmallDgx();
  EXPECT_EQ(Refusal(layout, Request(Mask({8}), 1)),
            "GPU 8 is granted but the node has 8 GPUs (0-7)");
  EXPECT_EQ(Refusal(layout, Request(0, 0)),
            "the job has 0 ranks on this node; a node runs at least 1");
  BindingRequest request = Request(0, 1);
  request.cpus_per_task = 0;
  EXPECT_EQ(Refusal(layout, request), "--cpus-per-task=0; a rank needs at least 1 CPU");
  NodeLayout empty;
  empty.numa_nodes.push_back({.os_index = 0, .memory_mb = 10, .cores = {}});
  EXPECT_EQ(Refusal(empty, Request(0, 1)),
            "the node has no cores on any NUMA node to bind ranks to; use "
            "--cpu-bind=none");
}

// --- Option parsing

TEST(BindingTest, ParsesTheThreeOptions) {
  EXPECT_EQ(*ParseGpuBind("closest"), (GpuBind{GpuBindKind::kClosest, 1}));
  EXPECT_EQ(*ParseGpuBind("Ordered"), (GpuBind{GpuBindKind::kOrdered, 1}));
  EXPECT_EQ(*ParseGpuBind("NONE"), (GpuBind{GpuBindKind::kNone, 1}));
  EXPECT_EQ(*ParseGpuBind("single:4"), (GpuBind{GpuBindKind::kSingle, 4}));
  EXPECT_EQ(ToString(*ParseGpuBind("Single:2")), "single:2");
  EXPECT_EQ(*ParseCpuBind("cores"), CpuBind::kCores);
  EXPECT_EQ(*ParseCpuBind("Threads"), CpuBind::kThreads);
  EXPECT_EQ(*ParseCpuBind("numa"), CpuBind::kNuma);
  EXPECT_EQ(*ParseCpuBind("none"), CpuBind::kNone);
  // Slurm's quiet modifier alone (Snakemake's `srun --cpu-bind=q`), or
  // before or after a type; ldoms are NUMA nodes.
  EXPECT_EQ(*ParseCpuBind("q"), CpuBind::kCores);
  EXPECT_EQ(*ParseCpuBind("quiet,threads"), CpuBind::kThreads);
  EXPECT_EQ(*ParseCpuBind("none,q"), CpuBind::kNone);
  EXPECT_EQ(*ParseCpuBind("ldoms"), CpuBind::kNuma);
  EXPECT_EQ(*ParseMemBind("local"), MemBind::kLocal);
  EXPECT_EQ(*ParseMemBind("none"), MemBind::kNone);
  EXPECT_EQ(ToString(CpuBind::kThreads), "threads");
  EXPECT_EQ(ToString(MemBind::kLocal), "local");
}

TEST(BindingTest, OptionErrorsSayWhatIsAllowed) {
  EXPECT_EQ(ParseGpuBind("foo").status().message(),
            "--gpu-bind: 'foo' is not ordered, closest, single:N or none");
  for (const char* bad : {"single:", "single:0", "single:x", "single:2x", "single:-1"}) {
    EXPECT_EQ(ParseGpuBind(bad).status().message(),
              std::string("--gpu-bind: '") + bad +
                  "': N of single:N is the ranks per GPU, a whole number of at "
                  "least 1");
  }
  EXPECT_EQ(ParseCpuBind("sockets").status().message(),
            "--cpu-bind: 'sockets' is not cores, threads, numa (ldoms), none, or quiet (q)");
  EXPECT_EQ(ParseCpuBind("cores,threads").status().message(),
            "--cpu-bind=cores,threads: give one binding type, with quiet (q) if you like: cores, "
            "threads, numa or none");
  EXPECT_EQ(ParseCpuBind("v,cores").status().message(),
            "--cpu-bind=v,cores: verbose is not printed per rank; `cohort show job ID --ranks` "
            "lists each rank's CPUs, GPUs and NUMA node");
  EXPECT_EQ(ParseMemBind("").status().message(), "--mem-bind: '' is not local or none");
}

}  // namespace
}  // namespace cohort::binding
