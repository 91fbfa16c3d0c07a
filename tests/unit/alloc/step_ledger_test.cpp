// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/step_ledger.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

namespace cohort::alloc {
namespace {

// An allocation of `nodes` nodes, each holding `cpus` CPUs and the GPUs of
// `gpus` (a mask), placed for `tasks_per_node` tasks of one CPU.
StepLedger Allocation(int nodes, int tasks_per_node, int cpus, std::uint64_t gpus) {
  std::vector<NodeGrant> grants;
  for (int i = 0; i < nodes; ++i) {
    grants.push_back({.node = 10 + i, .cpus = cpus, .memory_mb = 0, .gpus = gpus});
  }
  return StepLedger(std::move(grants), tasks_per_node, 1);
}

std::vector<int> Ranks(const StepPlacement& step) {
  std::vector<int> ranks;
  for (const StepNode& node : step.nodes) ranks.push_back(node.node_rank);
  return ranks;
}

std::vector<int> Tasks(const StepPlacement& step) {
  std::vector<int> tasks;
  for (const StepNode& node : step.nodes) tasks.push_back(node.tasks);
  return tasks;
}

TEST(StepLedgerTest, AStepWithoutOptionsRunsTheAllocationsTasksOnEveryNode) {
  const StepLedger ledger = Allocation(4, 8, 8, 0xFF);
  const StepPlacementResult step = ledger.Place({});
  ASSERT_EQ(step.outcome, Outcome::kPlaced) << step.reason;
  EXPECT_EQ(Ranks(step.placement), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Tasks(step.placement), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(step.placement.tasks, 32);
  for (const StepNode& node : step.placement.nodes) {
    EXPECT_EQ(node.cpus, 8);
    EXPECT_EQ(node.gpus, 0xFFu);
  }
}

TEST(StepLedgerTest, TwoStepsOfTwoNodesShareAFourNodeAllocationAndAThirdWaits) {
  StepLedger ledger = Allocation(4, 1, 8, 0xF);
  const StepPlacementResult a = ledger.Place({.nodes = 2});
  ASSERT_EQ(a.outcome, Outcome::kPlaced);
  ledger.Take(a.placement);
  const StepPlacementResult b = ledger.Place({.nodes = 2});
  ASSERT_EQ(b.outcome, Outcome::kPlaced);
  EXPECT_EQ(Ranks(a.placement), (std::vector<int>{0, 1}));
  EXPECT_EQ(Ranks(b.placement), (std::vector<int>{2, 3}));
  ledger.Take(b.placement);
  const StepPlacementResult c = ledger.Place({.nodes = 2});
  EXPECT_EQ(c.outcome, Outcome::kBusy);
  EXPECT_NE(c.reason.find("in use by running steps"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("--overlap"), std::string::npos) << c.reason;
  ledger.Give(a.placement);
  const StepPlacementResult again = ledger.Place({.nodes = 2});
  ASSERT_EQ(again.outcome, Outcome::kPlaced);
  EXPECT_EQ(Ranks(again.placement), (std::vector<int>{0, 1}));
}

TEST(StepLedgerTest, MoreNodesThanTheAllocationHasNamesBothNumbers) {
  const StepPlacementResult step = Allocation(4, 1, 8, 0).Place({.nodes = 5});
  EXPECT_EQ(step.outcome, Outcome::kInfeasible);
  EXPECT_EQ(step.reason,
            "the step asks for 5 nodes, but the allocation has 4; ask for -N 4 or fewer");
}

// -O/--overcommit: a step's tasks share CPUs, so more tasks than CPUs fit;
// with --exact it holds at most the node's CPUs, and an overcommitted job's
// steps are overcommitted too.
TEST(StepLedgerTest, OvercommittedTasksShareTheNodesCpus) {
  StepLedger ledger = Allocation(2, 1, 4, 0);
  const StepPlacementResult refused = ledger.Place({.tasks = 16});
  EXPECT_EQ(refused.outcome, Outcome::kInfeasible);
  EXPECT_NE(refused.reason.find("-O/--overcommit"), std::string::npos) << refused.reason;
  const StepPlacementResult shared =
      ledger.Place({.tasks = 16, .sharing = StepSharing::kExact, .overcommit = true});
  ASSERT_EQ(shared.outcome, Outcome::kPlaced) << shared.reason;
  EXPECT_EQ(Tasks(shared.placement), (std::vector<int>{8, 8}));
  for (const StepNode& node : shared.placement.nodes) EXPECT_EQ(node.cpus, 4);
  const StepPlacementResult past =
      ledger.Place({.nodes = 1, .tasks = kMaxTasksPerNode + 1, .overcommit = true});
  EXPECT_EQ(past.outcome, Outcome::kInfeasible);
  EXPECT_NE(past.reason.find("at most 4096 tasks a node"), std::string::npos) << past.reason;

  std::vector<NodeGrant> grants = {{.node = 1, .cpus = 2, .memory_mb = 0, .gpus = 0}};
  const StepLedger job(std::move(grants), 64, 2, /*overcommit=*/true);
  const StepPlacementResult step = job.Place({});
  ASSERT_EQ(step.outcome, Outcome::kPlaced) << step.reason;
  EXPECT_EQ(step.placement.tasks, 64);
  EXPECT_EQ(job.Place({.cpus_per_task = 3}).outcome, Outcome::kInfeasible)
      << "a task still needs its CPUs";
}

// A node the job lost (--no-kill) takes no step: the default step runs on
// the nodes left, and naming the lost one says so.
TEST(StepLedgerTest, ALostNodeTakesNoStep) {
  StepLedger ledger = Allocation(4, 1, 8, 0);
  ledger.Drop(1);
  const StepPlacementResult step = ledger.Place({});
  ASSERT_EQ(step.outcome, Outcome::kPlaced) << step.reason;
  EXPECT_EQ(Ranks(step.placement), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(step.placement.tasks, 3);
  const StepPlacementResult four = ledger.Place({.nodes = 4});
  EXPECT_EQ(four.outcome, Outcome::kInfeasible);
  EXPECT_EQ(four.reason,
            "the step asks for 4 nodes, but the allocation has 3; ask for -N 3 or fewer");
  const StepPlacementResult named = ledger.Place({.node_ranks = {1}});
  EXPECT_EQ(named.outcome, Outcome::kInfeasible);
  EXPECT_EQ(named.reason,
            "step: -w names node rank 1, which the job lost (--no-kill); name another");
}

TEST(StepLedgerTest, TasksAreDistributedInBlocksAndTheFirstNodesTakeTheRest) {
  const StepLedger ledger = Allocation(4, 8, 8, 0);
  const StepPlacementResult three = ledger.Place({.nodes = 2, .tasks = 3});
  ASSERT_EQ(three.outcome, Outcome::kPlaced);
  EXPECT_EQ(Tasks(three.placement), (std::vector<int>{2, 1}));
  // -n alone takes as few nodes as the allocation's tasks per node allow.
  const StepPlacementResult four = ledger.Place({.tasks = 4});
  ASSERT_EQ(four.outcome, Outcome::kPlaced);
  EXPECT_EQ(Tasks(four.placement), (std::vector<int>{4}));
  const StepPlacementResult twenty = ledger.Place({.tasks = 20});
  ASSERT_EQ(twenty.outcome, Outcome::kPlaced);
  EXPECT_EQ(Tasks(twenty.placement), (std::vector<int>{7, 7, 6}));
  const StepPlacementResult per_node = ledger.Place({.nodes = 2, .tasks_per_node = 2});
  ASSERT_EQ(per_node.outcome, Outcome::kPlaced);
  EXPECT_EQ(Tasks(per_node.placement), (std::vector<int>{2, 2}));
  EXPECT_EQ(per_node.placement.tasks, 4);
}

TEST(StepLedgerTest, ExactStepsShareANodeByCpusAndGpus) {
  StepLedger ledger = Allocation(1, 4, 8, 0xF);
  const StepRequest half{
      .tasks = 2, .cpus_per_task = 2, .gpus_per_node = 2, .sharing = StepSharing::kExact};
  const StepPlacementResult a = ledger.Place(half);
  ASSERT_EQ(a.outcome, Outcome::kPlaced) << a.reason;
  EXPECT_EQ(a.placement.nodes[0], (StepNode{.node_rank = 0, .tasks = 2, .cpus = 4, .gpus = 0x3}));
  ledger.Take(a.placement);
  const StepPlacementResult b = ledger.Place(half);
  ASSERT_EQ(b.outcome, Outcome::kPlaced) << b.reason;
  EXPECT_EQ(b.placement.nodes[0].gpus, 0xCu);
  ledger.Take(b.placement);
  EXPECT_EQ(ledger.FreeCpus(0), 0);
  EXPECT_EQ(ledger.Place(half).outcome, Outcome::kBusy);
  // Without GPUs asked, an exact step holds none.
  ledger.Give(b.placement);
  const StepPlacementResult cpu_only = ledger.Place({.tasks = 1, .sharing = StepSharing::kExact});
  ASSERT_EQ(cpu_only.outcome, Outcome::kPlaced);
  EXPECT_EQ(cpu_only.placement.nodes[0].gpus, 0u);
  EXPECT_EQ(cpu_only.placement.nodes[0].cpus, 1);
}

TEST(StepLedgerTest, AnOverlappingStepRunsBesideOthersAndHoldsNothing) {
  StepLedger ledger = Allocation(2, 1, 4, 0x3);
  const StepPlacementResult whole = ledger.Place({});
  ledger.Take(whole.placement);
  EXPECT_EQ(ledger.Place({}).outcome, Outcome::kBusy);
  const StepPlacementResult overlap = ledger.Place({.sharing = StepSharing::kOverlap});
  ASSERT_EQ(overlap.outcome, Outcome::kPlaced) << overlap.reason;
  EXPECT_EQ(overlap.placement.nodes[1].gpus, 0x3u);
  ledger.Take(overlap.placement);
  ledger.Give(overlap.placement);
  EXPECT_EQ(ledger.FreeCpus(0), 0);
  ledger.Give(whole.placement);
  EXPECT_EQ(ledger.FreeCpus(0), 4);
  EXPECT_EQ(ledger.FreeGpus(1), 0x3u);
}

TEST(StepLedgerTest, NamedNodesAreTakenAndTheRestComeLowestFirst) {
  const StepLedger ledger = Allocation(4, 1, 8, 0);
  const StepPlacementResult only = ledger.Place({.node_ranks = {2}});
  ASSERT_EQ(only.outcome, Outcome::kPlaced);
  EXPECT_EQ(Ranks(only.placement), (std::vector<int>{2}));
  const StepPlacementResult more = ledger.Place({.nodes = 2, .node_ranks = {3}});
  ASSERT_EQ(more.outcome, Outcome::kPlaced);
  EXPECT_EQ(Ranks(more.placement), (std::vector<int>{0, 3}));
}

TEST(StepLedgerTest, BadRequestsAreRefusedWithTheFieldAndTheFix) {
  const StepLedger ledger = Allocation(2, 2, 4, 0x1);
  const auto refused = [&](const StepRequest& request) {
    const StepPlacementResult result = ledger.Place(request);
    EXPECT_EQ(result.outcome, Outcome::kInfeasible);
    return result.reason;
  };
  EXPECT_EQ(refused({.node_ranks = {2}}),
            "step: -w names node rank 2, but the allocation's nodes are ranks 0-1");
  EXPECT_EQ(refused({.node_ranks = {1, 1}}),
            "step: -w names node rank 1 twice; name each node once");
  EXPECT_EQ(refused({.nodes = 1, .node_ranks = {0, 1}}),
            "step: -w names 2 nodes but -N is 1; name at most -N nodes");
  EXPECT_EQ(refused({.nodes = 2, .tasks = 1}),
            "step: -n 1 is fewer than its 2 nodes; every node of a step runs at least one task");
  EXPECT_EQ(refused({.nodes = 1, .tasks = 3, .tasks_per_node = 2}),
            "step: -n 3 does not fit 1 node × 2 tasks (--ntasks-per-node); ask for more nodes or "
            "fewer tasks");
  EXPECT_NE(refused({.nodes = -1}).find("counts of 0 or more"), std::string::npos);
  // Counts from the network may be absurd; none overflows.
  EXPECT_NE(refused({.tasks = 1 << 30}).find("at most"), std::string::npos);
  EXPECT_NE(refused({.tasks_per_node = 1 << 20}).find("more than a step runs"), std::string::npos);
  EXPECT_NE(refused({.tasks = 1 << 20, .cpus_per_task = 1 << 20}).find("need"), std::string::npos);
  // What no node of the allocation holds.
  EXPECT_EQ(refused({.nodes = 1, .tasks = 5}),
            "the step's 5 tasks × 1 CPU on a node need 5 CPUs, but the allocation holds 4 CPUs "
            "and 1 GPUs on each node; ask for fewer tasks or CPUs per task, or let tasks share "
            "CPUs with -O/--overcommit");
  EXPECT_NE(refused({.gpus_per_node = 2}).find("need 2 CPUs and 2 GPUs"), std::string::npos);
  EXPECT_EQ(StepLedger({}, 1, 1).Place({}).reason, "the allocation holds no nodes");
}

// Random steps starting and ending: the running steps never hold more CPUs
// than a node has, never the same GPU twice, and what waits could start on
// the idle allocation.
TEST(StepLedgerPropertyTest, RunningStepsNeverOversubscribeTheAllocation) {
  std::mt19937 rng(7);
  int placed = 0, waited = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int nodes = 1 + static_cast<int>(rng() % 6);
    const int cpus = 2 + static_cast<int>(rng() % 7);
    const int tasks_per_node = 1 + static_cast<int>(rng() % 2);
    StepLedger ledger = Allocation(nodes, tasks_per_node, cpus, 0xF);
    std::vector<StepPlacement> running;
    for (int event = 0; event < 60; ++event) {
      if (!running.empty() && rng() % 3 == 0) {
        const std::size_t i = rng() % running.size();
        ledger.Give(running[i]);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      StepRequest request;
      request.nodes = static_cast<int>(rng() % static_cast<unsigned>(nodes + 1));
      request.tasks = rng() % 2 == 0 ? 0 : request.nodes + static_cast<int>(rng() % 4);
      request.cpus_per_task = 1 + static_cast<int>(rng() % 2);
      request.gpus_per_node = static_cast<int>(rng() % 4) - 1;
      request.sharing = static_cast<StepSharing>(rng() % 3);
      const StepPlacementResult result = ledger.Place(request);
      if (result.outcome == Outcome::kBusy) {
        EXPECT_EQ(Allocation(nodes, tasks_per_node, cpus, 0xF).Place(request).outcome,
                  Outcome::kPlaced)
            << "a step waits that the idle allocation could not hold: " << result.reason;
        ++waited;
        continue;
      }
      if (result.outcome != Outcome::kPlaced) continue;
      int tasks = 0;
      for (const StepNode& node : result.placement.nodes) tasks += node.tasks;
      ASSERT_EQ(tasks, result.placement.tasks);
      ++placed;
      ledger.Take(result.placement);
      running.push_back(result.placement);
      for (int r = 0; r < nodes; ++r) {
        int used = 0;
        std::uint64_t gpus = 0;
        for (const StepPlacement& step : running) {
          if (step.sharing == StepSharing::kOverlap) continue;
          for (const StepNode& node : step.nodes) {
            if (node.node_rank != r) continue;
            used += node.cpus;
            ASSERT_EQ(gpus & node.gpus, 0u) << "two steps hold one GPU";
            gpus |= node.gpus;
          }
        }
        ASSERT_LE(used, cpus);
        ASSERT_EQ(ledger.FreeCpus(r), cpus - used);
      }
    }
  }
  // Both outcomes were explored.
  EXPECT_GT(placed, 1000);
  EXPECT_GT(waited, 1000);
}

}  // namespace
}  // namespace cohort::alloc
