// SPDX-License-Identifier: Apache-2.0
#include "cohort/gang_allocator.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "cohort/hostlist.h"

namespace cohort::alloc {

using topology::GroupId;
using topology::kNone;
using topology::SwitchId;

absl::Status ValidateGangRequest(const GangRequest& r) {
  auto invalid = [](std::string message) { return absl::InvalidArgumentError(std::move(message)); };
  if (r.nodes < 1) return invalid(fmt::format("nodes is {}; ask for at least 1 node (-N 1)", r.nodes));
  if (r.tasks_per_node < 1) {
    return invalid(fmt::format("ntasks-per-node is {}; it must be at least 1", r.tasks_per_node));
  }
  if (r.cpus_per_task < 1) {
    return invalid(fmt::format("cpus-per-task is {}; it must be at least 1", r.cpus_per_task));
  }
  if (r.gpus_per_node < 0 || r.gpus_per_node > 64) {
    return invalid(fmt::format("gpus-per-node is {}; it must be between 0 and 64", r.gpus_per_node));
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
    if (*r.segment < 1) return invalid(fmt::format("segment is {}; it must be at least 1", *r.segment));
    if (r.nodes % *r.segment != 0) {
      return invalid(fmt::format("{} nodes do not split into segments of {}; ask for a multiple of "
                                 "{} nodes or another --segment",
                                 r.nodes, *r.segment, *r.segment));
    }
    if (!r.required_nodes.empty()) {
      return invalid("--segment cannot be combined with required nodes (--nodelist)");
    }
  }
  if (static_cast<int>(r.required_nodes.size()) > r.nodes) {
    return invalid(fmt::format("{} required nodes but only {} nodes asked for; raise -N",
                               r.required_nodes.size(), r.nodes));
  }
  return absl::OkStatus();
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

// Per node of the gang.
struct GangAllocator::Need {
  int cpus = 0;
  std::int64_t memory_mb = 0;
  int gpus = 0;
  std::uint64_t features = 0;
  bool exclusive = false;
  int segment = 1;

  [[nodiscard]] bool Eligible(const NodeCapacity& c) const {
    return c.cpus >= cpus && c.memory_mb >= memory_mb && c.gpus >= gpus &&
           (c.features & features) == features;
  }
  [[nodiscard]] std::string Describe(const std::vector<std::string>& feature_names) const {
    std::vector<std::string> parts;
    if (gpus > 0) parts.push_back(fmt::format("{} GPUs", gpus));
    parts.push_back(fmt::format("{} CPUs", cpus));
    if (memory_mb > 0) parts.push_back(fmt::format("{} MB", memory_mb));
    std::vector<std::string> names;
    for (std::size_t i = 0; i < feature_names.size(); ++i) {
      if ((features >> i) & 1U) names.push_back(feature_names[i]);
    }
    if (!names.empty()) parts.push_back(fmt::format("features {}", fmt::join(names, ",")));
    return fmt::format("{}", fmt::join(parts, ", "));
  }
};

GangAllocator::GangAllocator(const topology::Topology& topology)
    : topology_(topology),
      fit_(topology.NodeCount(), 0),
      excluded_(topology.NodeCount(), 0),
      required_(topology.NodeCount(), 0),
      group_fit_(topology.Groups().size(), 0),
      group_cap_(topology.Groups().size(), 0),
      group_required_(topology.Groups().size(), 0) {}

PlacementResult GangAllocator::Feasible(const GangRequest& request, const NodePool& pool) {
  std::string key;
  const bool cacheable = request.required_nodes.empty() && request.excluded_nodes.empty();
  if (cacheable) {
    key = fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}", request.nodes, request.tasks_per_node,
                      request.cpus_per_task, request.gpus_per_node, request.memory_mb_per_node,
                      static_cast<int>(request.exclusivity), request.partition.value_or(-1),
                      request.max_leaves.value_or(0), request.segment.value_or(0),
                      pool.CapacityId(), fmt::join(request.features, ","));
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
  const std::optional<std::uint64_t> features = pool.FeatureMask(request.features);
  if (!features) {
    result.reason = fmt::format("no node has all of the features {}; known features: {}",
                                fmt::join(request.features, ","),
                                pool.FeatureNames().empty() ? "none"
                                                            : fmt::format("{}", fmt::join(pool.FeatureNames(), ",")));
    return result;
  }
  Need need;
  need.exclusive = request.exclusivity == Exclusivity::kExclusive;
  need.cpus = request.tasks_per_node * request.cpus_per_task;
  need.memory_mb = request.memory_mb_per_node;
  need.gpus = request.gpus_per_node;
  need.features = *features;
  need.segment = request.segment.value_or(1);

  for (const NodeId n : request.excluded_nodes) excluded_[n] = 1;
  for (const NodeId n : request.required_nodes) required_[n] = 1;
  result = TryPlace(request, pool, need, view, among);
  for (const NodeId n : request.excluded_nodes) excluded_[n] = 0;
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

PlacementResult GangAllocator::TryPlace(const GangRequest& request, const NodePool& pool,
                                        const Need& need, View view,
                                        const std::vector<NodeId>* among) {
  PlacementResult result;
  result.outcome = Outcome::kInfeasible;
  const topology::Topology& topo = topology_;
  const std::string where = request.partition
                                ? fmt::format("partition {}", pool.GetPartition(*request.partition).name)
                                : std::string("the cluster");

  // 1. Which nodes could host one node of the gang, and how many per group.
  std::fill(fit_.begin(), fit_.end(), 0);
  std::fill(group_fit_.begin(), group_fit_.end(), 0);
  int candidates = 0;
  int eligible = 0;
  int down = 0;
  int drained = 0;
  int fit = 0;
  auto mark = [&](NodeId n) {
    if (fit_[n] != 0) return;  // a repeat in `among`
    ++candidates;
    if (excluded_[n] != 0) return;
    const NodeCapacity& c = pool.Capacity(n);
    if (!need.Eligible(c)) return;
    ++eligible;
    if (view == View::kNow) {
      const NodeCondition condition = pool.Condition(n);
      if (condition == NodeCondition::kDown) {
        ++down;
        return;
      }
      if (condition == NodeCondition::kDrained) {
        ++drained;
        return;
      }
      const NodeFree& f = pool.Free(n);
      if (need.exclusive ? !pool.IsIdle(n)
                         : (f.cpus < need.cpus || f.memory_mb < need.memory_mb ||
                            std::popcount(f.gpus) < need.gpus)) {
        return;
      }
    }
    fit_[n] = 1;
    if (const GroupId g = topo.GroupOf(n); g != kNone) ++group_fit_[static_cast<std::size_t>(g)];
    ++fit;
  };
  if (among != nullptr) {
    const std::uint8_t* in = request.partition
                                 ? pool.GetPartition(*request.partition).contains.data()
                                 : nullptr;
    for (const NodeId n : *among) {
      if (in == nullptr || in[n] != 0) mark(n);
    }
  } else if (request.partition) {
    for (const NodeId n : pool.GetPartition(*request.partition).nodes) mark(n);
  } else {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) mark(n);
  }

  const int wanted = request.nodes;
  if (candidates < wanted) {
    result.reason = fmt::format("{} has {} nodes; the job asks for {}", where, candidates, wanted);
    return result;
  }
  if (eligible < wanted) {
    result.reason = fmt::format("only {} of the {} nodes of {} offer {} per node; the job asks for {}",
                                eligible, candidates, where, need.Describe(pool.FeatureNames()),
                                wanted);
    return result;
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
    } else if (!need.Eligible(pool.Capacity(n))) {
      why = fmt::format("does not offer {}", need.Describe(pool.FeatureNames()));
    } else if (pool.Condition(n) == NodeCondition::kDown) {
      why = "is down";
    } else if (pool.Condition(n) == NodeCondition::kDrained) {
      why = "is drained";
    }
    result.reason = fmt::format("required node {} {}", topo.NodeName(n), why);
    return result;
  }
  if (fit < wanted) {
    result.reason = fmt::format("{} nodes needed, {} of {} free now ({} down, {} drained, {} busy)",
                                wanted, fit, eligible, down, drained, eligible - fit - down - drained);
    return result;
  }

  // 2. Usable nodes per group: whole segments only.
  const auto& groups = topo.Groups();
  std::fill(group_required_.begin(), group_required_.end(), 0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    group_cap_[g] = group_fit_[g] - group_fit_[g] % need.segment;
  }
  std::vector<GroupId> forced;  // groups holding required nodes
  int forced_nodes = 0;
  SwitchId required_home = kNone;
  for (const NodeId n : request.required_nodes) {
    const GroupId g = topo.GroupOf(n);
    if (group_required_[g]++ == 0) {
      forced.push_back(g);
      required_home = required_home == kNone
                          ? groups[g].home
                          : topo.LowestCommonSwitch(required_home, groups[g].home);
      if (required_home == kNone) {
        result.reason = "the required nodes lie in switch trees with no common ancestor";
        return result;
      }
    }
    ++forced_nodes;
  }
  std::sort(forced.begin(), forced.end());

  // 3. Choose the domain and the groups in it.
  std::vector<GroupId> chosen;
  int best_groups = 0;
  const std::string segment_note =
      need.segment > 1 ? fmt::format(" in whole segments of {}", need.segment) : std::string();

  // A job that fits in one group goes to the tightest such group.
  GroupId single = kNone;
  if (forced.size() <= 1) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (group_cap_[g] < wanted) continue;
      if (!forced.empty() && forced.front() != static_cast<GroupId>(g)) continue;
      if (single == kNone || group_cap_[g] < group_cap_[single]) single = static_cast<GroupId>(g);
    }
  }
  if (single != kNone) {
    chosen.push_back(single);
    best_groups = 1;
  } else {
    // The lowest level with a switch that holds the job; there, the fewest
    // groups, then the tightest capacity, then the lowest id.
    SwitchId best = kNone;
    int best_capacity = 0;
    int level = -1;
    int largest = 0;
    SwitchId largest_at = kNone;
    std::vector<int> caps;
    for (const SwitchId s : topo.SwitchesByLevel()) {
      const topology::Switch& sw = topo.GetSwitch(s);
      if (best != kNone && sw.level > level) break;
      if (required_home != kNone && topo.LowestCommonSwitch(s, required_home) != s) continue;
      int capacity = 0;
      for (const GroupId g : sw.groups) capacity += group_cap_[g];
      if (capacity > largest) {
        largest = capacity;
        largest_at = s;
      }
      if (capacity < wanted) continue;
      // Fewest groups: the forced ones, then the largest others first.
      caps.clear();
      int sum = 0;
      for (const GroupId g : sw.groups) {
        if (group_required_[g] > 0) {
          sum += group_cap_[g];
        } else if (group_cap_[g] > 0) {
          caps.push_back(group_cap_[g]);
        }
      }
      std::sort(caps.begin(), caps.end(), std::greater<>());
      int k = static_cast<int>(forced.size());
      for (std::size_t i = 0; i < caps.size() && sum < wanted; ++i) {
        sum += caps[i];
        ++k;
      }
      if (sum < wanted) continue;
      if (request.max_leaves && topo.Blocks().empty() && k > *request.max_leaves) continue;
      if (best == kNone || k < best_groups || (k == best_groups && capacity < best_capacity)) {
        best = s;
        best_groups = k;
        best_capacity = capacity;
        level = sw.level;
      }
    }
    if (best == kNone) {
      if (largest >= wanted && request.max_leaves) {
        result.reason = fmt::format("no placement spans at most {} leaf switches (--switches={})",
                                    *request.max_leaves, *request.max_leaves);
      } else if (largest_at == kNone) {
        result.reason = fmt::format("{} nodes needed but no switch holds any of them{}", wanted,
                                    segment_note);
      } else {
        result.reason = fmt::format(
            "{} nodes needed{}, but no switch tree holds that many together{} (most: {} under "
            "{}); trees with no common ancestor cannot share a job",
            wanted, segment_note, view == View::kNow ? " now" : "", largest,
            topo.GetSwitch(largest_at).name);
      }
      return result;
    }

    // Tight fit with the fewest groups: the forced groups, then the set
    // whose capacities, largest first, are the smallest in lexicographic
    // order. Picking the largest member as small as possible keeps the
    // largest free groups whole for the next wide job.
    chosen = forced;
    int remaining = wanted;
    for (const GroupId g : forced) remaining -= group_cap_[g];
    std::vector<GroupId> others;  // ascending capacity, ties by id
    for (const GroupId g : topo.GetSwitch(best).groups) {
      if (group_required_[g] == 0 && group_cap_[g] > 0) others.push_back(g);
    }
    std::stable_sort(others.begin(), others.end(),
                     [&](GroupId a, GroupId b) { return group_cap_[a] < group_cap_[b]; });
    std::vector<int> prefix;
    for (int slots = best_groups - static_cast<int>(forced.size()); slots > 0 && remaining > 0;
         --slots) {
      prefix.assign(1, 0);
      for (const GroupId g : others) prefix.push_back(prefix.back() + group_cap_[g]);
      const auto n = static_cast<int>(others.size());
      int pick = n - 1;
      for (int i = 0; i < n; ++i) {
        const int cap = group_cap_[others[i]];
        // The (slots - 1) largest others no larger than this one, without it.
        int end_index = i + 1;
        while (end_index < n && group_cap_[others[end_index]] == cap) ++end_index;
        int low = std::max(0, end_index - (slots - 1));
        int sum = prefix[end_index] - prefix[low];
        if (i >= low && slots > 1) {
          sum -= cap;
          if (low > 0) sum += group_cap_[others[--low]];
        }
        if (cap + sum >= remaining) {
          pick = i;
          break;
        }
      }
      chosen.push_back(others[pick]);
      remaining -= group_cap_[others[pick]];
      others.erase(others.begin() + pick);
    }
  }

  // 4. Nodes: every usable node of each chosen group but the last, which
  // gives what is still missing.
  std::vector<NodeId> nodes;
  nodes.reserve(static_cast<std::size_t>(wanted));
  // Required nodes are reserved before any group's share is decided.
  std::vector<int> takes(chosen.size());
  int remaining = wanted - forced_nodes;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const GroupId g = chosen[i];
    const int extra = std::min(group_cap_[g] - group_required_[g], remaining);
    takes[i] = group_required_[g] + extra;
    remaining -= extra;
  }
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (takes[i] > 0) ChooseNodes(chosen[i], takes[i], pool, need, view, nodes);
  }
  std::sort(nodes.begin(), nodes.end());

  Placement& placement = result.placement;
  placement.domain = topo.LowestCommonSwitch(nodes);
  placement.level = placement.domain == kNone ? 0 : topo.GetSwitch(placement.domain).level;
  for (const NodeId n : nodes) {
    placement.leaves.push_back(topo.LeafOf(n));
    placement.groups.push_back(topo.GroupOf(n));
  }
  for (auto* list : {&placement.leaves, &placement.groups}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  if (request.max_leaves && static_cast<int>(placement.leaves.size()) > *request.max_leaves) {
    result.reason = fmt::format("the best placement spans {} leaf switches; --switches={} allows {}",
                                placement.leaves.size(), *request.max_leaves, *request.max_leaves);
    result.placement = {};
    return result;
  }
  if (view == View::kNow) {
    placement.grants.reserve(nodes.size());
    for (const NodeId n : nodes) {
      const NodeCapacity& c = pool.Capacity(n);
      NodeGrant grant{.node = n};
      if (need.exclusive) {
        grant.cpus = c.cpus;
        grant.memory_mb = c.memory_mb;
        grant.gpus = AllGpus(c.gpus);
      } else {
        grant.cpus = need.cpus;
        grant.memory_mb = need.memory_mb;
        grant.gpus = ChooseGpus(c, pool.Free(n).gpus, need.gpus);
      }
      placement.grants.push_back(grant);
    }
  }
  result.outcome = Outcome::kPlaced;
  return result;
}

void GangAllocator::ChooseNodes(GroupId group, int take, const NodePool& pool, const Need& need,
                                View view, std::vector<NodeId>& out) {
  const std::vector<NodeId>& members = topology_.Groups()[group].nodes;
  const std::size_t start = out.size();
  // Required nodes first, then the fullest nodes that still fit (best fit
  // keeps emptier nodes whole for wider jobs), then by id.
  for (const NodeId n : members) {
    if (fit_[n] != 0 && required_[n] != 0) out.push_back(n);
  }
  const std::size_t first_free = out.size();
  for (const NodeId n : members) {
    if (fit_[n] != 0 && required_[n] == 0) out.push_back(n);
  }
  const auto taken = static_cast<std::size_t>(take);
  if (out.size() - start > taken && view == View::kNow) {
    auto key = [&](NodeId n) {
      const NodeFree& f = pool.Free(n);
      return std::tuple(std::popcount(f.gpus) - need.gpus, f.cpus - need.cpus, n);
    };
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first_free), out.end(),
              [&](NodeId a, NodeId b) { return key(a) < key(b); });
  }
  out.resize(start + std::min(taken, out.size() - start));
}

}  // namespace cohort::alloc
