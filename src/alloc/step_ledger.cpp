// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/step_ledger.h"

#include <algorithm>
#include <bit>
#include <utility>

#include <fmt/format.h>

#include "cohort/check.h"

namespace cohort::alloc {

/// A request with every default resolved against the allocation.
struct StepLedger::Shape {
  int nodes = 0;
  int tasks = 0;
  int cpus_per_task = 1;
  int gpus_per_node = -1;      ///< -1: as the sharing mode gives
  std::vector<int> counts;     ///< tasks by position among the step's nodes (balanced block)
  std::vector<char> required;  ///< by node rank: named by -w
  int required_count = 0;
  StepSharing sharing = StepSharing::kWholeNodes;
  bool overcommit = false;
};

namespace {

std::string_view Plural(int n) { return n == 1 ? "" : "s"; }

// Slurm's block distribution: tasks numbered node by node, the first nodes
// taking one more when they do not divide evenly ("2,1" for 3 over 2).
std::vector<int> Balanced(int tasks, int nodes) {
  std::vector<int> counts(static_cast<std::size_t>(nodes), tasks / nodes);
  for (int i = 0; i < tasks % nodes; ++i) ++counts[static_cast<std::size_t>(i)];
  return counts;
}

}  // namespace

StepLedger::StepLedger(std::vector<NodeGrant> grants, int tasks_per_node, int cpus_per_task,
                       bool overcommit)
    : grants_(std::move(grants)),
      tasks_per_node_(std::max(tasks_per_node, 1)),
      cpus_per_task_(std::max(cpus_per_task, 1)),
      overcommit_(overcommit),
      cpus_used_(grants_.size(), 0),
      gpus_used_(grants_.size(), 0),
      dropped_(grants_.size(), 0),
      usable_(static_cast<int>(grants_.size())) {}

void StepLedger::Drop(int node_rank) {
  if (node_rank < 0 || node_rank >= NodeCount()) return;
  std::uint8_t& dropped = dropped_[static_cast<std::size_t>(node_rank)];
  if (dropped == 0) --usable_;
  dropped = 1;
}

int StepLedger::FreeCpus(int node_rank) const {
  const auto r = static_cast<std::size_t>(node_rank);
  return grants_[r].cpus - cpus_used_[r];
}

std::uint64_t StepLedger::FreeGpus(int node_rank) const {
  const auto r = static_cast<std::size_t>(node_rank);
  return grants_[r].gpus & ~gpus_used_[r];
}

absl::Status StepLedger::Resolve(const StepRequest& request, Shape& shape) const {
  const int ranks = NodeCount();  // node ranks, lost ones too
  const int have = usable_;       // the nodes a step may use
  if (have == 0) return absl::FailedPreconditionError("the allocation holds no nodes");
  if (request.nodes < 0 || request.tasks < 0 || request.tasks_per_node < 0 ||
      request.cpus_per_task < 0 || request.gpus_per_node < -1) {
    return absl::InvalidArgumentError(
        "step: -N, -n, --ntasks-per-node, -c and --gpus-per-node take counts of 0 or more");
  }
  // Bounds past any node, so that no product below overflows.
  constexpr int kMost = 1 << 20;
  if (request.nodes > kMost || request.tasks > kMost || request.tasks_per_node > kMost ||
      request.cpus_per_task > kMost || request.gpus_per_node > 64) {
    return absl::InvalidArgumentError(fmt::format(
        "step: -N, -n, --ntasks-per-node and -c take at most {}, --gpus-per-node at most 64",
        kMost));
  }
  shape.required.assign(static_cast<std::size_t>(ranks), 0);
  for (const int r : request.node_ranks) {
    if (r < 0 || r >= ranks) {
      return absl::InvalidArgumentError(fmt::format(
          "step: -w names node rank {}, but the allocation's nodes are ranks 0-{}", r, ranks - 1));
    }
    if (dropped_[static_cast<std::size_t>(r)] != 0) {
      return absl::FailedPreconditionError(fmt::format(
          "step: -w names node rank {}, which the job lost (--no-kill); name another", r));
    }
    if (shape.required[static_cast<std::size_t>(r)] != 0) {
      return absl::InvalidArgumentError(
          fmt::format("step: -w names node rank {} twice; name each node once", r));
    }
    shape.required[static_cast<std::size_t>(r)] = 1;
  }
  shape.required_count = static_cast<int>(request.node_ranks.size());
  shape.sharing = request.sharing;
  shape.overcommit = request.overcommit || overcommit_;
  shape.cpus_per_task = request.cpus_per_task > 0 ? request.cpus_per_task : cpus_per_task_;
  shape.gpus_per_node = request.gpus_per_node;
  const bool explicit_tpn = request.tasks_per_node > 0;
  const int tpn = explicit_tpn ? request.tasks_per_node : tasks_per_node_;
  if (request.nodes > 0) {
    shape.nodes = request.nodes;
  } else if (request.tasks > 0) {
    shape.nodes =
        std::max(shape.required_count,
                 std::min(have, static_cast<int>((std::int64_t{request.tasks} + tpn - 1) / tpn)));
  } else {
    shape.nodes = shape.required_count > 0 ? shape.required_count : have;
  }
  if (shape.nodes > have) {
    return absl::FailedPreconditionError(
        fmt::format("the step asks for {} node{}, but the allocation has {}; ask for -N {} or "
                    "fewer",
                    shape.nodes, Plural(shape.nodes), have, have));
  }
  const std::int64_t tasks = request.tasks > 0 ? request.tasks : std::int64_t{shape.nodes} * tpn;
  if (tasks > kMost) {
    return absl::InvalidArgumentError(
        fmt::format("step: {} tasks is more than a step runs (at most {})", tasks, kMost));
  }
  shape.tasks = static_cast<int>(tasks);
  if (shape.required_count > shape.nodes) {
    return absl::InvalidArgumentError(
        fmt::format("step: -w names {} nodes but -N is {}; name at most -N nodes",
                    shape.required_count, shape.nodes));
  }
  if (shape.tasks < shape.nodes) {
    return absl::InvalidArgumentError(
        fmt::format("step: -n {} is fewer than its {} nodes; every node of a step runs at least "
                    "one task",
                    shape.tasks, shape.nodes));
  }
  if (explicit_tpn && shape.tasks > std::int64_t{shape.nodes} * tpn) {
    return absl::InvalidArgumentError(
        fmt::format("step: -n {} does not fit {} node{} × {} tasks (--ntasks-per-node); ask for "
                    "more nodes or fewer tasks",
                    shape.tasks, shape.nodes, Plural(shape.nodes), tpn));
  }
  shape.counts = Balanced(shape.tasks, shape.nodes);
  return absl::OkStatus();
}

StepLedger::Need StepLedger::NeedOn(const Shape& shape, int node_rank, int tasks) const {
  const NodeGrant& grant = grants_[static_cast<std::size_t>(node_rank)];
  if (shape.sharing == StepSharing::kExact) {
    const std::int64_t cpus = std::int64_t{tasks} * shape.cpus_per_task;
    return {.cpus = shape.overcommit ? std::min<std::int64_t>(cpus, grant.cpus) : cpus,
            .gpus = std::max(shape.gpus_per_node, 0)};
  }
  return {.cpus = grant.cpus,
          .gpus = shape.gpus_per_node >= 0 ? shape.gpus_per_node : std::popcount(grant.gpus)};
}

StepNode StepLedger::Grant(const Shape& shape, int node_rank, int tasks) const {
  const NodeGrant& grant = grants_[static_cast<std::size_t>(node_rank)];
  const Need need = NeedOn(shape, node_rank, tasks);
  StepNode node{
      .node_rank = node_rank, .tasks = tasks, .cpus = static_cast<int>(need.cpus), .gpus = 0};
  std::uint64_t left = shape.sharing == StepSharing::kOverlap ? grant.gpus : FreeGpus(node_rank);
  for (int gpus = need.gpus; gpus > 0 && left != 0; --gpus) {
    const std::uint64_t lowest = left & (~left + 1);
    node.gpus |= lowest;
    left &= ~lowest;
  }
  return node;
}

bool StepLedger::Fits(const Shape& shape, int node_rank, int tasks, Against against) const {
  if (dropped_[static_cast<std::size_t>(node_rank)] != 0) return false;
  const NodeGrant& grant = grants_[static_cast<std::size_t>(node_rank)];
  const Need need = NeedOn(shape, node_rank, tasks);
  const bool cpus_fit = shape.overcommit
                            ? shape.cpus_per_task <= grant.cpus && tasks <= kMaxTasksPerNode
                            : std::int64_t{tasks} * shape.cpus_per_task <= grant.cpus;
  if (!cpus_fit || need.gpus > std::popcount(grant.gpus)) return false;
  if (against == Against::kIdle || shape.sharing == StepSharing::kOverlap) return true;
  return need.cpus <= FreeCpus(node_rank) && need.gpus <= std::popcount(FreeGpus(node_rank));
}

StepPlacementResult StepLedger::Place(const StepRequest& request) const {
  StepPlacementResult result;
  Shape shape;
  if (absl::Status s = Resolve(request, shape); !s.ok()) {
    result.reason = std::string(s.message());
    return result;
  }
  // Walks the nodes by rank: every node -w names, and the first others that
  // fit, until the step has its nodes. A node's position among the chosen
  // gives its task count.
  const auto choose = [&](Against against, std::vector<int>& chosen) {
    int optional_left = shape.nodes - shape.required_count;
    for (int r = 0; r < NodeCount() && static_cast<int>(chosen.size()) < shape.nodes; ++r) {
      const int tasks = shape.counts[chosen.size()];
      if (shape.required[static_cast<std::size_t>(r)] != 0) {
        if (!Fits(shape, r, tasks, against)) return false;
        chosen.push_back(r);
      } else if (optional_left > 0 && Fits(shape, r, tasks, against)) {
        chosen.push_back(r);
        --optional_left;
      }
    }
    return static_cast<int>(chosen.size()) == shape.nodes;
  };
  std::vector<int> chosen;
  if (choose(Against::kFreeNow, chosen)) {
    result.outcome = Outcome::kPlaced;
    result.placement.tasks = shape.tasks;
    result.placement.sharing = shape.sharing;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      result.placement.nodes.push_back(Grant(shape, chosen[i], shape.counts[i]));
    }
    return result;
  }
  std::vector<int> idle;
  const int most = shape.counts.front();
  if (choose(Against::kIdle, idle)) {
    result.outcome = Outcome::kBusy;
    result.reason = fmt::format(
        "the step's {} node{} ({} task{} on the busiest) are in use by running steps of the "
        "allocation; it starts when they end, or run it with --overlap to share them",
        shape.nodes, Plural(shape.nodes), most, Plural(most));
    return result;
  }
  const NodeGrant& first = grants_.front();
  const std::string gpus =
      shape.gpus_per_node > 0 ? fmt::format(" and {} GPUs", shape.gpus_per_node) : "";
  if (shape.overcommit) {
    result.reason = fmt::format(
        "the step's {} task{} on a node share its CPUs (--overcommit), but need {} CPU{}{} and "
        "at most {} tasks a node, and the allocation holds {} CPUs and {} GPUs on each node; ask "
        "for fewer tasks or CPUs per task",
        most, Plural(most), shape.cpus_per_task, Plural(shape.cpus_per_task), gpus,
        kMaxTasksPerNode, first.cpus, std::popcount(first.gpus));
    return result;
  }
  result.reason = fmt::format(
      "the step's {} task{} × {} CPU{} on a node need {} CPUs{}, but the allocation holds {} "
      "CPUs and {} GPUs on each node; ask for fewer tasks or CPUs per task, or let tasks share "
      "CPUs with -O/--overcommit",
      most, Plural(most), shape.cpus_per_task, Plural(shape.cpus_per_task),
      std::int64_t{most} * shape.cpus_per_task, gpus, first.cpus, std::popcount(first.gpus));
  return result;
}

absl::Status StepLedger::Hold(const StepPlacement& step) {
  if (step.sharing == StepSharing::kOverlap) return absl::OkStatus();
  std::vector<int> cpus = cpus_used_;
  std::vector<std::uint64_t> gpus = gpus_used_;
  for (const StepNode& node : step.nodes) {
    const auto r = static_cast<std::size_t>(node.node_rank);
    if (node.node_rank < 0 || r >= grants_.size() || node.cpus < 0 || (gpus[r] & node.gpus) != 0 ||
        (node.gpus & ~grants_[r].gpus) != 0 || (cpus[r] += node.cpus) > grants_[r].cpus) {
      return absl::FailedPreconditionError(fmt::format(
          "it holds on node rank {} what the allocation does not have free", node.node_rank));
    }
    gpus[r] |= node.gpus;
  }
  cpus_used_ = std::move(cpus);
  gpus_used_ = std::move(gpus);
  return absl::OkStatus();
}

void StepLedger::Take(const StepPlacement& step) {
  const absl::Status held = Hold(step);
  COHORT_CHECK(held.ok(), "a step takes what the allocation does not have free");
}

void StepLedger::Give(const StepPlacement& step) {
  if (step.sharing == StepSharing::kOverlap) return;
  for (const StepNode& node : step.nodes) {
    const auto r = static_cast<std::size_t>(node.node_rank);
    COHORT_CHECK(cpus_used_[r] >= node.cpus && (gpus_used_[r] & node.gpus) == node.gpus,
                 "a step gives back what it did not hold");
    cpus_used_[r] -= node.cpus;
    gpus_used_[r] &= ~node.gpus;
  }
}

}  // namespace cohort::alloc
