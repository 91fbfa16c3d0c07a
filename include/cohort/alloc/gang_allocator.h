// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"

namespace cohort::plugin {
struct AllocatorPlugins;
struct FilterContext;
struct FilterTally;
enum class View : std::uint8_t;
}  // namespace cohort::plugin

/// All-or-nothing placement of a gang over the switch tree and NVLink blocks.
namespace cohort::alloc {

/// kShared: the gang's share of each node; kExclusive: whole nodes; kTopo
/// (--exclusive=topo): whole nodes, in placement groups (blocks, or a leaf's
/// nodes in no block) where no other job has a node, closed to every other
/// job while it runs.
enum class Exclusivity : std::uint8_t { kShared, kExclusive, kTopo };

/// The most tasks a node runs of one job or step (Slurm's
/// MaxTasksPerNode); without --overcommit its CPUs bound them first.
inline constexpr int kMaxTasksPerNode = 4096;

/// What one job asks for, per node of its gang.
struct GangRequest {
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::int64_t memory_mb_per_node = 0;  ///< 0: no memory request
  Exclusivity exclusivity = Exclusivity::kShared;
  std::optional<PartitionId> partition;  ///< none: every node of the pool
  std::vector<std::string> features;     ///< every node must have all of them
  std::vector<NodeId> required_nodes;    ///< must be part of the gang
  std::vector<NodeId> excluded_nodes;    ///< must not be
  std::optional<int> max_leaves;         ///< --switches=N: at most N leaf switches
  std::optional<int> segment;            ///< --segment=S: S-node pieces, each in one block
  bool spread_segments = false;          ///< --spread-segments: each segment in a group of its own
  /// --spares=N: that many more whole nodes of the same shape, placed with
  /// the gang (the placement holds nodes + spares grants, in topology
  /// order, and the caller sets the spares apart).
  int spares = 0;
  /// -O/--overcommit: each node holds cpus_per_task CPUs however many tasks
  /// it runs (they share them).
  bool overcommit = false;
};

/// The CPUs a gang holds on each of its nodes: tasks × CPUs per task, or
/// with --overcommit the CPUs of one task.
[[nodiscard]] inline int CpusPerNode(const GangRequest& request) {
  return request.overcommit ? request.cpus_per_task
                            : request.tasks_per_node * request.cpus_per_task;
}

/// Rejects requests no cluster could run: counts below one, tasks or GPUs
/// beyond a node's limits, a node count not a multiple of the segment.
/// Returns InvalidArgument naming the field and the fix.
[[nodiscard]] absl::Status ValidateGangRequest(const GangRequest& request);

enum class Outcome : std::uint8_t {
  kPlaced,      ///< the placement holds the whole gang
  kBusy,        ///< would fit an idle cluster: wait
  kInfeasible,  ///< can never run here; the reason says why
};

struct Placement {
  /// One per node, by node rank: in topology order (Topology::OrderOf), so
  /// that each --segment is S consecutive node ranks.
  std::vector<NodeGrant> grants;
  topology::SwitchId domain = topology::kNone;  ///< the lowest switch above the gang
  int level = 0;                                ///< that switch's level
  std::vector<topology::SwitchId> leaves;       ///< distinct leaves spanned, ascending
  std::vector<topology::GroupId> groups;        ///< distinct groups spanned, ascending
};

struct PlacementResult {
  Outcome outcome = Outcome::kInfeasible;
  Placement placement;  ///< only for kPlaced
  std::string reason;   ///< for kBusy and kInfeasible
};

/// Places gangs over one topology. Which nodes may host the gang, which
/// fitting nodes of a group it takes and which switch domain it lands in are
/// policies (include/cohort/plugin.h). With the defaults it prefers, in
/// order: (1) the lowest switch whose subtree holds the whole job, (2) the
/// fewest groups (leaf switches, or NVLink blocks where the topology has
/// them) under it, (3) the tightest fit, keeping large free groups whole. A
/// job that fits in one group lands in one group. Within a node, GPUs that
/// share a locality group are taken first. Deterministic: ties go to the
/// lowest id.
///
/// Keeps scratch buffers between calls, so one instance serves one thread.
/// The topology must outlive it.
class GangAllocator {
 public:
  /// With the built-in policies (filter/resources, score/locality,
  /// domain/tightest).
  explicit GangAllocator(const topology::Topology& topology);
  /// With the policies of `plugins` (from plugin::MakePlugins: none null,
  /// filter/resources first).
  GangAllocator(const topology::Topology& topology, const plugin::AllocatorPlugins& plugins);

  /// Whether a failed placement says if the gang could ever run (kBusy or
  /// kInfeasible), or only that it does not fit now (kBusy).
  enum class Classify : std::uint8_t { kYes, kNo };

  /// Finds where `request` goes in `pool` now, without changing the pool
  /// (commit the grants with NodePool::Commit). Never a partial placement.
  /// With `among`, only those nodes are considered (repeats allowed) and the
  /// rest count as busy: a caller that knows which few nodes can have room
  /// saves a pass over the whole pool. The reasons then count only `among`.
  [[nodiscard]] PlacementResult Place(const GangRequest& request, const NodePool& pool,
                                      Classify classify = Classify::kYes,
                                      const std::vector<NodeId>* among = nullptr);

  /// Whether the gang could ever run: would it fit if every node of the pool
  /// were up and idle? kBusy (it would) or kInfeasible with the reason; never
  /// a placement. Node capacities are fixed for a pool's life, so the answer
  /// is kept per request shape (requests that name no nodes).
  [[nodiscard]] PlacementResult Feasible(const GangRequest& request, const NodePool& pool);

  [[nodiscard]] const topology::Topology& Topology() const { return topology_; }

 private:
  using View = plugin::View;
  struct Attempt;

  GangAllocator(const topology::Topology& topology,
                std::shared_ptr<const plugin::AllocatorPlugins> plugins);

  /// Validates, marks the request's nodes, and places in `view`.
  PlacementResult Run(const GangRequest& request, const NodePool& pool, View view,
                      const std::vector<NodeId>* among);
  /// The steps of one attempt, in order; each returns false with
  /// `attempt.result.reason` set when the gang cannot be placed.
  PlacementResult TryPlace(Attempt& attempt);
  bool FilterNodes(Attempt& attempt);
  bool ExplainShortfall(Attempt& attempt, const plugin::FilterContext& context,
                        const plugin::FilterTally& tally);
  [[nodiscard]] std::string_view RuledOutBy(const plugin::FilterContext& context,
                                            NodeId node) const;
  [[nodiscard]] std::string WholeSegmentsFree(int segment, int wanted) const;
  bool CountGroups(Attempt& attempt);
  bool ChooseDomain(Attempt& attempt);
  bool ChooseDomainIn(Attempt& attempt, std::span<const int> group_cap);
  bool ChooseBlockAggregate(Attempt& attempt);
  void ExplainNoDomain(Attempt& attempt);
  bool TakeNodes(Attempt& attempt);
  void ChooseNodes(const Attempt& attempt, topology::GroupId group, int take,
                   std::vector<NodeId>& out);

  const topology::Topology& topology_;
  std::shared_ptr<const plugin::AllocatorPlugins> plugins_;
  std::vector<NodeId> all_nodes_;            ///< 0..NodeCount-1: the candidates without a partition
  std::vector<NodeId> kept_;                 ///< scratch: the nodes the filters keep
  std::vector<NodeId> kept_next_;            ///< scratch: the next filter's output
  std::vector<topology::GroupId> group_of_;  ///< by node: Topology::GroupOf, at hand
  std::vector<std::uint8_t> fit_;            ///< by node: may host one node of the gang
  std::vector<std::uint8_t> excluded_;       ///< by node: --exclude's, and SpareNodes= always
  std::vector<std::uint8_t> required_;       ///< by node
  std::vector<int> group_fit_;               ///< by group: fitting nodes
  std::vector<int> group_cap_;               ///< by group: usable nodes (whole segments)
  std::vector<int> group_required_;          ///< by group: required nodes in it
  std::vector<int> masked_cap_;              ///< scratch: group_cap_ within one block aggregate
  std::vector<topology::GroupId> chosen_;    ///< scratch: the groups of the gang
  /// Feasible's answers by shape (nodes, CPUs, memory, GPUs, exclusivity,
  /// partition, features, --switches, --segment, --spread-segments).
  std::map<std::string, PlacementResult> feasible_;
};

/// What one node of a gang gets on `node`: the whole node when exclusive,
/// else the CPUs, memory and GPUs (ChooseGpus) asked, whether or not free.
[[nodiscard]] NodeGrant GrantOn(NodeId node, const NodePool& pool, Exclusivity exclusivity,
                                int cpus, std::int64_t memory_mb, int gpus);
/// One node of `request`'s gang on `node` from what is free there now (the
/// group holds of --exclusive=topo are the caller's to check); none when it
/// does not fit.
[[nodiscard]] std::optional<NodeGrant> GrantFor(const GangRequest& request, const NodePool& pool,
                                                NodeId node);

/// Chooses `count` free GPUs of a node: the locality group with the fewest
/// free GPUs that still holds them all, else groups with the most free GPUs
/// first; lowest indices within a group. Returns 0 when fewer are free.
[[nodiscard]] std::uint64_t ChooseGpus(const NodeCapacity& capacity, std::uint64_t free, int count);

}  // namespace cohort::alloc
