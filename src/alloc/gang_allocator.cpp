// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/gang_allocator.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "cohort/alloc/placement_check.h"
#include "cohort/check.h"
#include "cohort/fmt_absl.h"
#include "cohort/plugin.h"
#include "cohort/text/hostlist.h"

namespace cohort::alloc {

using topology::GroupId;
using topology::kNone;
using topology::SwitchId;

absl::Status ValidateGangRequest(const GangRequest& r) {
  auto invalid = [](std::string message) { return absl::InvalidArgumentError(message); };
  if (r.nodes < 1)
    return invalid(fmt::format("nodes is {}; ask for at least 1 node (-N 1)", r.nodes));
  if (r.tasks_per_node < 1) {
    return invalid(fmt::format("ntasks-per-node is {}; it must be at least 1", r.tasks_per_node));
  }
  if (r.cpus_per_task < 1) {
    return invalid(fmt::format("cpus-per-task is {}; it must be at least 1", r.cpus_per_task));
  }
  if (r.gpus_per_node < 0 || r.gpus_per_node > 64) {
    return invalid(
        fmt::format("gpus-per-node is {}; it must be between 0 and 64", r.gpus_per_node));
  }
  if (r.memory_mb_per_node < 0) {
    return invalid(fmt::format("mem is {} MB; it must not be negative", r.memory_mb_per_node));
  }
  if (static_cast<std::int64_t>(r.tasks_per_node) * r.cpus_per_task > 1'000'000) {
    return invalid("ntasks-per-node times cpus-per-task is over 1000000 cpus per node");
  }
  if (r.max_leaves && *r.max_leaves < 1) {
    return invalid(fmt::format("switches is {}; it must be at least 1", *r.max_leaves));
  }
  if (r.segment) {
    if (*r.segment < 1)
      return invalid(fmt::format("segment is {}; it must be at least 1", *r.segment));
    if (r.nodes % *r.segment != 0) {
      return invalid(
          fmt::format("{} nodes do not split into segments of {}; ask for a multiple of "
                      "{} nodes or another --segment",
                      r.nodes, *r.segment, *r.segment));
    }
    if (!r.required_nodes.empty()) {
      return invalid("--segment cannot be combined with required nodes (--nodelist)");
    }
  } else if (r.spread_segments) {
    return invalid("--spread-segments needs --segment=S: the size of the pieces to spread");
  }
  if (r.spares < 0 || r.spares > r.nodes) {
    return invalid(fmt::format("spares is {}; it must be between 0 and the job's {} node{}",
                               r.spares, r.nodes, r.nodes == 1 ? "" : "s"));
  }
  if (r.spares > 0 && r.segment) {
    return invalid(
        "--spares cannot be combined with --segment; keep spares in each block with "
        "SpareNodes= on its BlockName line in topology.conf");
  }
  if (static_cast<int>(r.required_nodes.size()) > r.nodes) {
    return invalid(fmt::format("{} required nodes but only {} nodes asked for; raise -N",
                               r.required_nodes.size(), r.nodes));
  }
  return absl::OkStatus();
}

NodeGrant GrantOn(NodeId node, const NodePool& pool, Exclusivity exclusivity, int cpus,
                  std::int64_t memory_mb, int gpus) {
  const NodeCapacity& c = pool.Capacity(node);
  NodeGrant grant{.node = node, .holds_group = exclusivity == Exclusivity::kTopo};
  if (exclusivity != Exclusivity::kShared) {
    grant.cpus = c.cpus;
    grant.memory_mb = c.memory_mb;
    grant.gpus = AllGpus(c.gpus);
  } else {
    grant.cpus = cpus;
    grant.memory_mb = memory_mb;
    grant.gpus = ChooseGpus(c, pool.Free(node).gpus, gpus);
  }
  return grant;
}

std::optional<NodeGrant> GrantFor(const GangRequest& request, const NodePool& pool, NodeId node) {
  const int gpus = request.gpus_per_node;
  NodeGrant grant = GrantOn(node, pool, request.exclusivity, CpusPerNode(request),
                            request.memory_mb_per_node, gpus);
  const NodeFree& free = pool.Free(node);
  if (grant.cpus > free.cpus || grant.memory_mb > free.memory_mb ||
      (free.gpus & grant.gpus) != grant.gpus || std::popcount(grant.gpus) < gpus) {
    return std::nullopt;
  }
  return grant;
}

std::uint64_t ChooseGpus(const NodeCapacity& capacity, std::uint64_t free, int count) {
  if (count == 0) return 0;
  if (std::popcount(free) < count) return 0;
  // Best fit: the group with the fewest free GPUs that holds them all.
  int best = -1;
  int best_free = 0;
  for (std::size_t g = 0; g < capacity.gpu_groups.size(); ++g) {
    const int n = std::popcount(free & capacity.gpu_groups[g]);
    if (n >= count && (best < 0 || n < best_free)) {
      best = static_cast<int>(g);
      best_free = n;
    }
  }
  auto take_lowest = [](std::uint64_t from, int n) {
    std::uint64_t taken = 0;
    for (; n > 0 && from != 0; --n) {
      const std::uint64_t bit = from & (~from + 1);
      taken |= bit;
      from &= ~bit;
    }
    return taken;
  };
  if (best >= 0) return take_lowest(free & capacity.gpu_groups[best], count);
  // Otherwise spread over as few groups as possible: fullest groups first.
  std::vector<std::uint64_t> groups = capacity.gpu_groups;
  if (groups.empty()) groups.push_back(free);
  std::stable_sort(groups.begin(), groups.end(), [free](std::uint64_t a, std::uint64_t b) {
    return std::popcount(free & a) > std::popcount(free & b);
  });
  std::uint64_t taken = 0;
  for (const std::uint64_t group : groups) {
    const int want = count - std::popcount(taken);
    if (want == 0) break;
    taken |= take_lowest(free & group, want);
  }
  // GPUs outside every listed group (should not happen) as a last resort.
  taken |= take_lowest(free & ~taken, count - std::popcount(taken));
  return taken;
}

namespace {

std::string Describe(const plugin::NodeNeed& need, const std::vector<std::string>& feature_names) {
  std::vector<std::string> parts;
  if (need.gpus > 0) parts.push_back(fmt::format("{} GPUs", need.gpus));
  parts.push_back(fmt::format("{} CPUs", need.cpus));
  if (need.memory_mb > 0) parts.push_back(fmt::format("{} MB", need.memory_mb));
  std::vector<std::string> names;
  for (std::size_t i = 0; i < feature_names.size(); ++i) {
    if ((need.features >> i) & 1U) names.push_back(feature_names[i]);
  }
  if (!names.empty()) parts.push_back(fmt::format("features {}", fmt::join(names, ",")));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// A group that has room for `whole` segments, for reasons: "nvl72-5", or
// "nvl72-5 (2)".
std::string SegmentsOffered(const topology::Topology& topology, GroupId group, int whole) {
  const std::string name = GroupName(topology, group);
  return whole == 1 ? name : fmt::format("{} ({})", name, whole);
}

}  // namespace

// One placement attempt: its inputs and what its steps found so far.
struct GangAllocator::Attempt {
  const GangRequest& request;
  const NodePool& pool;
  const plugin::NodeNeed& need;
  View view;
  const std::vector<NodeId>* among;
  std::string where{};              // "partition p" or "the cluster", for reasons
  std::string_view ruled_out_by{};  // the first policy filter that dropped a node
  int candidates = 0;               // distinct nodes the filters looked at
  int fit = 0;                      // distinct nodes they kept
  std::vector<GroupId> forced{};    // groups holding required nodes, ascending
  int forced_nodes = 0;
  SwitchId required_home = kNone;
  PlacementResult result{};
};

GangAllocator::GangAllocator(const topology::Topology& topology)
    : GangAllocator(topology, plugin::DefaultAllocatorPlugins()) {}

GangAllocator::GangAllocator(const topology::Topology& topology,
                             const plugin::AllocatorPlugins& plugins)
    : GangAllocator(topology, std::make_shared<const plugin::AllocatorPlugins>(plugins)) {}

GangAllocator::GangAllocator(const topology::Topology& topology,
                             std::shared_ptr<const plugin::AllocatorPlugins> plugins)
    : topology_(topology),
      plugins_(std::move(plugins)),
      all_nodes_(static_cast<std::size_t>(topology.NodeCount())),
      fit_(topology.NodeCount(), 0),
      excluded_(topology.NodeCount(), 0),
      required_(topology.NodeCount(), 0),
      group_fit_(topology.Groups().size(), 0),
      group_cap_(topology.Groups().size(), 0),
      group_required_(topology.Groups().size(), 0),
      masked_cap_(topology.Groups().size(), 0) {
  COHORT_CHECK(
      plugins_ && !plugins_->node_filters.empty() && plugins_->node_score && plugins_->domain_score,
      "GangAllocator needs the plugins of plugin::MakePlugins");
  std::iota(all_nodes_.begin(), all_nodes_.end(), 0);
  group_of_.reserve(all_nodes_.size());
  for (const NodeId n : all_nodes_) group_of_.push_back(topology.GroupOf(n));
  // SpareNodes= take no gang: only a repair moves a rank onto one.
  for (const NodeId n : all_nodes_) {
    if (topology.IsSpare(n)) excluded_[n] = 1;
  }
  // Reserved whole so that the filters' appends never reallocate.
  kept_.reserve(all_nodes_.size());
  kept_next_.reserve(all_nodes_.size());
}

PlacementResult GangAllocator::Feasible(const GangRequest& request, const NodePool& pool) {
  std::string key;
  const bool cacheable = request.required_nodes.empty() && request.excluded_nodes.empty();
  if (cacheable) {
    key = fmt::format(
        "{}+{}/{}{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}", request.nodes, request.spares,
        request.tasks_per_node, request.overcommit ? "o" : "", request.cpus_per_task,
        request.gpus_per_node, request.memory_mb_per_node, static_cast<int>(request.exclusivity),
        request.partition.value_or(-1), request.max_leaves.value_or(0), request.segment.value_or(0),
        request.spread_segments ? 1 : 0, pool.CapacityId(), fmt::join(request.features, ","));
    if (const auto it = feasible_.find(key); it != feasible_.end()) return it->second;
  }
  PlacementResult result = Run(request, pool, View::kIdleCluster, nullptr);
  if (result.outcome == Outcome::kPlaced) result.outcome = Outcome::kBusy;
  result.placement = {};
  if (cacheable) feasible_.emplace(std::move(key), result);
  return result;
}

PlacementResult GangAllocator::Run(const GangRequest& request, const NodePool& pool, View view,
                                   const std::vector<NodeId>* among) {
  PlacementResult result;
  if (absl::Status valid = ValidateGangRequest(request); !valid.ok()) {
    result.reason = std::string(valid.message());
    return result;
  }
  if (request.spares > 0) {
    // The spares are nodes of the gang's shape placed with it.
    GangRequest whole = request;
    whole.nodes += std::exchange(whole.spares, 0);
    return Run(whole, pool, view, among);
  }
  const std::optional<std::uint64_t> features = pool.FeatureMask(request.features);
  if (!features) {
    result.reason = fmt::format(
        "no node has all of the features {}; known features: {}", fmt::join(request.features, ","),
        pool.FeatureNames().empty() ? "none"
                                    : fmt::format("{}", fmt::join(pool.FeatureNames(), ",")));
    return result;
  }
  plugin::NodeNeed need;
  need.exclusivity = request.exclusivity;
  need.cpus = CpusPerNode(request);
  need.memory_mb = request.memory_mb_per_node;
  need.gpus = request.gpus_per_node;
  need.features = *features;
  need.segment = request.segment.value_or(1);

  for (const NodeId n : request.excluded_nodes) excluded_[n] = 1;
  for (const NodeId n : request.required_nodes) required_[n] = 1;
  Attempt attempt{.request = request, .pool = pool, .need = need, .view = view, .among = among};
  result = TryPlace(attempt);
  for (const NodeId n : request.excluded_nodes) excluded_[n] = topology_.IsSpare(n) ? 1 : 0;
  for (const NodeId n : request.required_nodes) required_[n] = 0;
  return result;
}

PlacementResult GangAllocator::Place(const GangRequest& request, const NodePool& pool,
                                     Classify classify, const std::vector<NodeId>* among) {
  PlacementResult result = Run(request, pool, View::kNow, among);
  if (result.outcome != Outcome::kPlaced) {
    result.placement = {};
    result.outcome = Outcome::kBusy;
    if (classify == Classify::kYes) {
      // Would it fit if every node were up and idle? Then it only waits.
      PlacementResult ideal = Feasible(request, pool);
      if (ideal.outcome == Outcome::kInfeasible) result = std::move(ideal);
    }
  }
  return result;
}

PlacementResult GangAllocator::TryPlace(Attempt& attempt) {
  attempt.result.outcome = Outcome::kInfeasible;
  attempt.where =
      attempt.request.partition
          ? fmt::format("partition {}", attempt.pool.GetPartition(*attempt.request.partition).name)
          : std::string("the cluster");
  if (FilterNodes(attempt) && CountGroups(attempt) && ChooseDomain(attempt) && TakeNodes(attempt)) {
    attempt.result.outcome = Outcome::kPlaced;
  }
  return std::move(attempt.result);
}

// 1. Which nodes could host one node of the gang, and how many per group.
bool GangAllocator::FilterNodes(Attempt& attempt) {
  const GangRequest& request = attempt.request;
  const NodePool& pool = attempt.pool;
  std::fill(fit_.begin(), fit_.end(), 0);
  std::fill(group_fit_.begin(), group_fit_.end(), 0);
  std::span<const NodeId> candidates = all_nodes_;
  if (attempt.among != nullptr) {
    candidates = *attempt.among;
    if (request.partition) {
      const std::vector<std::uint8_t>& in = pool.GetPartition(*request.partition).contains;
      kept_next_.clear();
      for (const NodeId n : *attempt.among) {
        if (in[n] != 0) kept_next_.push_back(n);
      }
      candidates = kept_next_;
    }
  } else if (request.partition) {
    candidates = pool.GetPartition(*request.partition).nodes;
  }
  const plugin::FilterContext context{.request = request,
                                      .need = attempt.need,
                                      .pool = pool,
                                      .topology = topology_,
                                      .view = attempt.view,
                                      .excluded = excluded_};
  plugin::FilterTally tally;
  const auto occurrences = static_cast<int>(candidates.size());
  const auto& filters = plugins_->node_filters;
  kept_.clear();
  filters.front()->Filter(context, candidates, kept_, tally);
  for (std::size_t i = 1; i < filters.size(); ++i) {
    const int before = tally.ruled_out;
    kept_next_.clear();
    filters[i]->Filter(context, kept_, kept_next_, tally);
    if (attempt.ruled_out_by.empty() && tally.ruled_out > before) {
      attempt.ruled_out_by = filters[i]->Name();
    }
    kept_.swap(kept_next_);
  }
  // Raw pointers: the byte stores to `fit` could alias any vector's data
  // pointer, which would be reloaded at every node.
  std::uint8_t* const fit = fit_.data();
  int* const group_fit = group_fit_.data();
  const GroupId* const group_of = group_of_.data();
  int repeats = 0;
  for (const NodeId n : kept_) {
    // A node `among` repeats passes the filters at each occurrence but
    // counts once, as a candidate and as a fitting node.
    if (fit[n] != 0) {
      ++repeats;
      continue;
    }
    fit[n] = 1;
    if (const GroupId g = group_of[n]; g != kNone) ++group_fit[g];
  }
  attempt.candidates = occurrences - repeats;
  attempt.fit = static_cast<int>(kept_.size()) - repeats;
  return ExplainShortfall(attempt, context, tally);
}

// The policy filter that drops `node` when filter/resources keeps it;
// empty when none does. Only for reasons: it runs the filters once more.
std::string_view GangAllocator::RuledOutBy(const plugin::FilterContext& context,
                                           NodeId node) const {
  const auto& filters = plugins_->node_filters;
  plugin::FilterTally ignored;
  std::vector<NodeId> kept;
  filters.front()->Filter(context, {&node, 1}, kept, ignored);
  if (kept.empty()) return {};
  for (std::size_t i = 1; i < filters.size(); ++i) {
    kept.clear();
    filters[i]->Filter(context, {&node, 1}, kept, ignored);
    if (kept.empty()) return filters[i]->Name();
  }
  return {};
}

// Why too few nodes passed the filters, in the words of the step that fell
// short; true when enough did.
bool GangAllocator::ExplainShortfall(Attempt& attempt, const plugin::FilterContext& context,
                                     const plugin::FilterTally& tally) {
  const GangRequest& request = attempt.request;
  const NodePool& pool = attempt.pool;
  const std::string& where = attempt.where;
  std::string& reason = attempt.result.reason;
  const int candidates = attempt.candidates;
  const int fit = attempt.fit;
  const int wanted = request.nodes;
  const int eligible = candidates - tally.excluded - tally.ineligible - tally.ruled_out;
  const std::string ruled_out =
      tally.ruled_out > 0
          ? fmt::format("; {} more ruled out by {}", tally.ruled_out, attempt.ruled_out_by)
          : std::string();
  if (candidates < wanted) {
    reason = fmt::format("{} has {} nodes; the job asks for {}", where, candidates, wanted);
    return false;
  }
  if (eligible < wanted) {
    reason = fmt::format("only {} of the {} nodes of {} offer {} per node{}; the job asks for {}",
                         eligible, candidates, where, Describe(attempt.need, pool.FeatureNames()),
                         ruled_out, wanted);
    return false;
  }
  for (const NodeId n : request.required_nodes) {
    if (fit_[n] != 0) continue;
    const bool in_partition =
        !request.partition || pool.GetPartition(*request.partition).contains[n] != 0;
    std::string why = "is busy";
    if (!in_partition) {
      why = fmt::format("is not in {}", where);
    } else if (excluded_[n] != 0) {
      why = "is also excluded";
    } else if (!attempt.need.Fits(pool.Capacity(n))) {
      why = fmt::format("does not offer {}", Describe(attempt.need, pool.FeatureNames()));
    } else if (pool.Condition(n) == NodeCondition::kDown) {
      why = "is down";
    } else if (pool.Condition(n) == NodeCondition::kDrained) {
      why = "is drained";
    } else if (const std::string_view by = RuledOutBy(context, n); !by.empty()) {
      why = fmt::format("is ruled out by {}", by);
    } else if (pool.IsIdle(n) && pool.GroupOf(n) != kNone && pool.GroupHeld(pool.GroupOf(n))) {
      const GroupId group = pool.GroupOf(n);
      why = fmt::format("is in {} {}, which another job holds whole (--exclusive=topo)",
                        topology_.Groups()[group].block == kNone ? "leaf" : "block",
                        GroupName(topology_, group));
    }
    reason = fmt::format("required node {} {}", topology_.NodeName(n), why);
    return false;
  }
  if (fit < wanted) {
    reason = fmt::format("{} nodes needed, {} of {} free now ({} down, {} drained, {} busy{})",
                         wanted, fit, eligible, tally.down, tally.drained,
                         eligible - fit - tally.down - tally.drained, ruled_out);
    if (attempt.need.segment > 1) reason += WholeSegmentsFree(attempt.need.segment, wanted);
    if (attempt.need.exclusivity == Exclusivity::kTopo) {
      reason += fmt::format("; --exclusive=topo counts only {} with no other job in them",
                            topology_.Blocks().empty() ? "leaf switches" : "blocks");
    }
    return false;
  }
  return true;
}

// "; whole segments of 18 free: nvl72-5, nvl72-6 (2 of the 5 needed)": the
// blocks (or leaves) that could hold a segment now, from group_fit_.
std::string GangAllocator::WholeSegmentsFree(int segment, int wanted) const {
  std::vector<std::string> offering;
  int whole = 0;
  bool more = false;
  for (std::size_t g = 0; g < group_fit_.size(); ++g) {
    const int here = group_fit_[g] / segment;
    if (here == 0) continue;
    whole += here;
    more = more || offering.size() == 8;
    if (offering.size() < 8) {
      offering.push_back(SegmentsOffered(topology_, static_cast<GroupId>(g), here));
    }
  }
  if (whole == 0) return fmt::format("; no block has a whole segment of {} free", segment);
  return fmt::format("; whole segments of {} free: {}{} ({} of the {} needed)", segment,
                     fmt::join(offering, ", "), more ? ", …" : "", whole, wanted / segment);
}

// 2. Usable nodes per group (whole segments only), and the groups and the
// switch the required nodes pin.
bool GangAllocator::CountGroups(Attempt& attempt) {
  const auto& groups = topology_.Groups();
  const int segment = attempt.need.segment;
  std::fill(group_required_.begin(), group_required_.end(), 0);
  // --spread-segments: at most one segment from each group.
  const int most = attempt.request.spread_segments ? segment : std::numeric_limits<int>::max();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    group_cap_[g] = std::min(group_fit_[g] - group_fit_[g] % segment, most);
  }
  for (const NodeId n : attempt.request.required_nodes) {
    const GroupId g = topology_.GroupOf(n);
    if (group_required_[g]++ == 0) {
      attempt.forced.push_back(g);
      attempt.required_home =
          attempt.required_home == kNone
              ? groups[g].home
              : topology_.LowestCommonSwitch(attempt.required_home, groups[g].home);
      if (attempt.required_home == kNone) {
        attempt.result.reason = "the required nodes lie in switch trees with no common ancestor";
        return false;
      }
    }
    ++attempt.forced_nodes;
  }
  std::sort(attempt.forced.begin(), attempt.forced.end());
  return true;
}

// 3. The domain and the groups in it: the domain score's choice, within one
// aggregate of BlockSizes where the topology lists them.
bool GangAllocator::ChooseDomain(Attempt& attempt) {
  // Segments are placed block by block: BlockSizes bounds whole jobs only.
  if (!topology_.BlockLevels().empty() && !attempt.request.segment) {
    return ChooseBlockAggregate(attempt);
  }
  if (ChooseDomainIn(attempt, group_cap_)) return true;
  ExplainNoDomain(attempt);
  return false;
}

// BlockSizes: the job lies in one aggregate of the smallest level that can
// hold it (the tightest one with room now, lowest id on a tie), else the next
// level up; or in the nodes outside every block.
bool GangAllocator::ChooseBlockAggregate(Attempt& attempt) {
  const int wanted = attempt.request.nodes;
  const std::vector<topology::BlockLevel>& levels = topology_.BlockLevels();
  const std::vector<topology::Group>& groups = topology_.Groups();
  const auto holds_forced = [&](const std::vector<topology::BlockId>& aggregate) {
    return std::all_of(attempt.forced.begin(), attempt.forced.end(), [&](GroupId g) {
      return groups[g].block != kNone &&
             std::find(aggregate.begin(), aggregate.end(), groups[g].block) != aggregate.end();
    });
  };
  int most = 0;
  const std::vector<topology::BlockId>* most_at = nullptr;
  for (const topology::BlockLevel& level : levels) {
    if (level.size < wanted) continue;
    const std::vector<topology::BlockId>* best = nullptr;
    int best_cap = 0;
    for (const std::vector<topology::BlockId>& aggregate : level.aggregates) {
      if (!holds_forced(aggregate)) continue;
      int cap = 0;
      for (const topology::BlockId b : aggregate) {
        if (const GroupId g = topology_.GroupOfBlock(b); g != kNone) cap += group_cap_[g];
      }
      if (cap > most) {
        most = cap;
        most_at = &aggregate;
      }
      if (cap >= wanted && (best == nullptr || cap < best_cap)) {
        best = &aggregate;
        best_cap = cap;
      }
    }
    if (best == nullptr) continue;
    std::fill(masked_cap_.begin(), masked_cap_.end(), 0);
    for (const topology::BlockId b : *best) {
      if (const GroupId g = topology_.GroupOfBlock(b); g != kNone) masked_cap_[g] = group_cap_[g];
    }
    if (ChooseDomainIn(attempt, masked_cap_)) return true;
  }
  // The nodes in no block, under the switch tree's rules alone.
  const bool forced_in_blocks = std::any_of(attempt.forced.begin(), attempt.forced.end(),
                                            [&](GroupId g) { return groups[g].block != kNone; });
  if (!forced_in_blocks) {
    bool any = false;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      masked_cap_[g] = groups[g].block == kNone ? group_cap_[g] : 0;
      any = any || masked_cap_[g] > 0;
    }
    if (any && ChooseDomainIn(attempt, masked_cap_)) return true;
  }
  const std::string sizes = fmt::format("{}", fmt::join(topology_.BlockSizes(), ","));
  std::string& reason = attempt.result.reason;
  if (levels.back().size < wanted) {
    reason = fmt::format(
        "{} nodes are more than the largest block (BlockSizes={} allows {}); ask for at most "
        "{} nodes, or give --segment=S to place the job in pieces of S nodes",
        wanted, sizes, levels.back().size, levels.back().size);
  } else if (most_at == nullptr) {
    reason = fmt::format("{} nodes needed, but no block aggregate of BlockSizes={} holds them{}",
                         wanted, sizes, attempt.forced.empty() ? "" : " with the required nodes");
  } else {
    const auto& blocks = topology_.Blocks();
    const std::string first = blocks[most_at->front()].name;
    const std::string last = blocks[most_at->back()].name;
    reason = fmt::format(
        "{} nodes needed within one block aggregate of BlockSizes={}, but none has that many "
        "free{} (most: {} in {})",
        wanted, sizes, attempt.view == View::kNow ? " now" : "", most,
        first == last ? first : fmt::format("{} to {}", first, last));
  }
  return false;
}

bool GangAllocator::ChooseDomainIn(Attempt& attempt, std::span<const int> group_cap) {
  const plugin::DomainContext context{.request = attempt.request,
                                      .topology = topology_,
                                      .wanted = attempt.request.nodes,
                                      .group_cap = group_cap,
                                      .group_required = group_required_,
                                      .forced = attempt.forced,
                                      .required_home = attempt.required_home};
  chosen_.clear();
  return plugins_->domain_score->Choose(context, chosen_);
}

// Why no switch holds the gang, from the switch that holds the most of it.
void GangAllocator::ExplainNoDomain(Attempt& attempt) {
  const GangRequest& request = attempt.request;
  const int wanted = request.nodes;
  int largest = 0;
  SwitchId largest_at = kNone;
  for (const SwitchId s : topology_.SwitchesByLevel()) {
    if (attempt.required_home != kNone &&
        topology_.LowestCommonSwitch(s, attempt.required_home) != s) {
      continue;
    }
    int capacity = 0;
    for (const GroupId g : topology_.GetSwitch(s).groups) capacity += group_cap_[g];
    if (capacity > largest) {
      largest = capacity;
      largest_at = s;
    }
  }
  const int segment = attempt.need.segment;
  const std::string segment_note =
      segment > 1 ? fmt::format(" in whole segments of {}", segment) : std::string();
  std::string& reason = attempt.result.reason;
  if (largest >= wanted && request.max_leaves) {
    reason = fmt::format("no placement spans at most {} leaf switches (--switches={})",
                         *request.max_leaves, *request.max_leaves);
  } else if (largest_at == kNone) {
    reason = fmt::format("{} nodes needed but no switch holds any of them{}", wanted, segment_note);
  } else if (segment > 1) {
    // Name the blocks (or leaves) that still offer whole segments.
    std::vector<std::string> offering;
    for (const GroupId g : topology_.GetSwitch(largest_at).groups) {
      const int whole = group_cap_[g] / segment;
      if (whole == 0) continue;
      offering.push_back(SegmentsOffered(topology_, g, whole));
    }
    reason = fmt::format(
        "{} segments of {} nodes needed, but only {} whole segments of {} are free together{} "
        "(under {}: {})",
        wanted / segment, segment, largest / segment, segment,
        attempt.view == View::kNow ? " now" : "", topology_.GetSwitch(largest_at).name,
        fmt::join(offering, ", "));
  } else {
    reason = fmt::format(
        "{} nodes needed{}, but no switch tree holds that many together{} (most: {} under "
        "{}); trees with no common ancestor cannot share a job",
        wanted, segment_note, attempt.view == View::kNow ? " now" : "", largest,
        topology_.GetSwitch(largest_at).name);
  }
}

// 4. Nodes: every usable node of each chosen group but the last, which gives
// what is still missing; then the placement and its grants.
bool GangAllocator::TakeNodes(Attempt& attempt) {
  const GangRequest& request = attempt.request;
  const NodePool& pool = attempt.pool;
  const int wanted = request.nodes;
  std::vector<NodeId> nodes;
  nodes.reserve(static_cast<std::size_t>(wanted));
  // Required nodes are reserved before any group's share is decided.
  std::vector<int> takes(chosen_.size());
  int remaining = wanted - attempt.forced_nodes;
  for (std::size_t i = 0; i < chosen_.size(); ++i) {
    const GroupId g = chosen_[i];
    const int extra = std::min(group_cap_[g] - group_required_[g], remaining);
    takes[i] = group_required_[g] + extra;
    remaining -= extra;
  }
  for (std::size_t i = 0; i < chosen_.size(); ++i) {
    if (takes[i] > 0) ChooseNodes(attempt, chosen_[i], takes[i], nodes);
  }
  // Node ranks in topology order: a group's nodes are consecutive, and each
  // group gives whole segments, so every S consecutive ranks share a group.
  std::sort(nodes.begin(), nodes.end(),
            [&](NodeId a, NodeId b) { return topology_.OrderOf(a) < topology_.OrderOf(b); });

  Placement& placement = attempt.result.placement;
  placement.domain = topology_.LowestCommonSwitch(nodes);
  placement.level = placement.domain == kNone ? 0 : topology_.GetSwitch(placement.domain).level;
  for (const NodeId n : nodes) {
    placement.leaves.push_back(topology_.LeafOf(n));
    placement.groups.push_back(topology_.GroupOf(n));
  }
  for (auto* list : {&placement.leaves, &placement.groups}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  if (request.max_leaves && static_cast<int>(placement.leaves.size()) > *request.max_leaves) {
    attempt.result.reason =
        fmt::format("the best placement spans {} leaf switches; --switches={} allows {}",
                    placement.leaves.size(), *request.max_leaves, *request.max_leaves);
    placement = {};
    return false;
  }
  if (attempt.view == View::kNow) {
    const plugin::NodeNeed& need = attempt.need;
    placement.grants.reserve(nodes.size());
    for (const NodeId n : nodes) {
      placement.grants.push_back(
          GrantOn(n, pool, need.exclusivity, need.cpus, need.memory_mb, need.gpus));
    }
  }
  return true;
}

void GangAllocator::ChooseNodes(const Attempt& attempt, GroupId group, int take,
                                std::vector<NodeId>& out) {
  const std::vector<NodeId>& members = topology_.Groups()[group].nodes;
  const std::size_t start = out.size();
  // Required nodes first, then the others in the node score's order, then
  // the first `take` of them all.
  for (const NodeId n : members) {
    if (fit_[n] != 0 && required_[n] != 0) out.push_back(n);
  }
  const std::size_t first_free = out.size();
  for (const NodeId n : members) {
    if (fit_[n] != 0 && required_[n] == 0) out.push_back(n);
  }
  const auto taken = static_cast<std::size_t>(take);
  if (out.size() - start > taken && attempt.view == View::kNow) {
    const plugin::ScoreContext context{.need = attempt.need,
                                       .pool = attempt.pool,
                                       .take = take - static_cast<int>(first_free - start)};
    plugins_->node_score->Order(context, std::span(out).subspan(first_free));
  }
  out.resize(start + std::min(taken, out.size() - start));
}

}  // namespace cohort::alloc
