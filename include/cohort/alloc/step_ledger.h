// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"

/// Job steps inside an allocation, as `srun` places them inside `sbatch`:
/// an allocation (a job's gang) holds its nodes for the job's whole run,
/// and each step takes some of what it holds for the step's own run. A step
/// is a gang of its own: it gets every node and task it asks for at once,
/// or waits, or is refused when the allocation could never hold it.
/// Pure; the caller keeps one ledger per running allocation.
namespace cohort::alloc {

/// How a step shares its nodes with the allocation's other steps.
enum class StepSharing : std::uint8_t {
  /// Without --exact (Slurm's default): every CPU and GPU the allocation
  /// holds on each of its nodes, so that a second step on those nodes waits.
  kWholeNodes,
  /// --exact: only what its tasks ask, --cpus-per-task CPUs each and its
  /// --gpus-per-node (none unless asked), so that steps can share a node.
  kExact,
  /// --overlap: what it asks (as kWholeNodes), counted against no other
  /// step and waiting for none.
  kOverlap,
};

/// What one step asks of its allocation; 0 means "as the allocation has it".
struct StepRequest {
  int nodes = 0;           ///< -N; 0: every node, or with -n only as many as the tasks need
  int tasks = 0;           ///< -n; 0: nodes × tasks per node
  int tasks_per_node = 0;  ///< --ntasks-per-node (with -n: the most per node); 0: the allocation's
  int cpus_per_task = 0;   ///< -c; 0: the allocation's
  int gpus_per_node = -1;  ///< --gpus-per-node; -1: not asked
  /// -w: nodes the step must run on, as node ranks of the allocation.
  std::vector<int> node_ranks{};
  StepSharing sharing = StepSharing::kWholeNodes;
  /// -O/--overcommit (or an overcommitted allocation's): a node's tasks
  /// share its CPUs, more than one a CPU; with --exact the step holds at
  /// most what the node has.
  bool overcommit = false;
};

/// One node of a step: how many of the step's tasks run there and what
/// they hold.
struct StepNode {
  int node_rank = 0;  ///< in the allocation
  int tasks = 0;
  int cpus = 0;
  std::uint64_t gpus = 0;  ///< GPU indices, as a mask

  friend bool operator==(const StepNode&, const StepNode&) = default;
};

/// Where a step runs: its nodes by ascending node rank, its first task on
/// the first of them (tasks are numbered node by node, as Slurm's block
/// distribution numbers them).
struct StepPlacement {
  std::vector<StepNode> nodes;
  int tasks = 0;
  StepSharing sharing = StepSharing::kWholeNodes;
};

struct StepPlacementResult {
  Outcome outcome = Outcome::kInfeasible;
  StepPlacement placement;  ///< only for kPlaced
  std::string reason;       ///< for kBusy and kInfeasible: says what to change
};

/// What one allocation holds and what its running steps use of it.
class StepLedger {
 public:
  /// `grants` by node rank, as the allocation was placed; `tasks_per_node`,
  /// `cpus_per_task` and `overcommit` as the job asked them (the steps of
  /// an overcommitted job are).
  StepLedger(std::vector<NodeGrant> grants, int tasks_per_node, int cpus_per_task,
             bool overcommit = false);

  /// Where the step would run now (kPlaced), or that it must wait for
  /// running steps to end (kBusy: "Step creation temporarily disabled"),
  /// or that it never fits the allocation (kInfeasible, naming what it
  /// asks and what the allocation has). InvalidArgument-worthy requests
  /// (negative counts, a node rank outside the allocation) are kInfeasible
  /// with the field named. Deterministic: lowest node ranks and GPU indices
  /// first.
  [[nodiscard]] StepPlacementResult Place(const StepRequest& request) const;

  /// A placed step starts: what it holds is no longer free (an --overlap
  /// step holds nothing). Check-fails where Hold would refuse.
  void Take(const StepPlacement& step);
  /// Take for a step read back from elsewhere (a store): FailedPrecondition,
  /// and nothing taken, when it names a node rank the allocation does not
  /// have or holds a CPU or GPU that is not free.
  [[nodiscard]] absl::Status Hold(const StepPlacement& step);
  /// A step ended: what it held is free again.
  void Give(const StepPlacement& step);
  /// The allocation lost that node (--no-kill): no step is placed there, and
  /// a step's default node count leaves it out.
  void Drop(int node_rank);

  [[nodiscard]] int NodeCount() const { return static_cast<int>(grants_.size()); }
  [[nodiscard]] int FreeCpus(int node_rank) const;
  [[nodiscard]] std::uint64_t FreeGpus(int node_rank) const;

 private:
  struct Shape;  // the request with every default resolved
  struct Need {  // what a step holds on one node
    std::int64_t cpus = 0;
    int gpus = 0;
  };
  /// Whether a node is judged by what is free now or by the idle allocation.
  enum class Against : std::uint8_t { kFreeNow, kIdle };
  [[nodiscard]] absl::Status Resolve(const StepRequest& request, Shape& shape) const;
  [[nodiscard]] Need NeedOn(const Shape& shape, int node_rank, int tasks) const;
  [[nodiscard]] bool Fits(const Shape& shape, int node_rank, int tasks, Against against) const;
  [[nodiscard]] StepNode Grant(const Shape& shape, int node_rank, int tasks) const;

  std::vector<NodeGrant> grants_;
  int tasks_per_node_ = 1;
  int cpus_per_task_ = 1;
  bool overcommit_ = false;
  std::vector<int> cpus_used_;            ///< by node rank
  std::vector<std::uint64_t> gpus_used_;  ///< by node rank
  std::vector<std::uint8_t> dropped_;     ///< by node rank: lost (Drop)
  int usable_ = 0;                        ///< node ranks not dropped
};

}  // namespace cohort::alloc
