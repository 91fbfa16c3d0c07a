// SPDX-License-Identifier: Apache-2.0
#include "plugins/domain/walk.h"

#include <algorithm>
#include <functional>

namespace cohort::plugin {

namespace {

// Where the walk landed: one group that holds the whole gang, or a switch
// and how many of its groups the gang needs at the fewest.
struct LowestSwitch {
  GroupId single = topology::kNone;
  SwitchId domain = topology::kNone;
  int groups = 0;
};

bool Better(Fit fit, int capacity, int than) {
  return fit == Fit::kTightest ? capacity < than : capacity > than;
}

LowestSwitch FindLowestSwitch(const DomainContext& context, Fit fit) {
  const topology::Topology& topo = context.topology;
  const std::span<const int> cap = context.group_cap;
  const int wanted = context.wanted;
  LowestSwitch found;
  if (context.forced.size() <= 1) {
    for (std::size_t g = 0; g < cap.size(); ++g) {
      if (cap[g] < wanted) continue;
      if (!context.forced.empty() && context.forced.front() != static_cast<GroupId>(g)) continue;
      if (found.single == topology::kNone || Better(fit, cap[g], cap[found.single])) {
        found.single = static_cast<GroupId>(g);
      }
    }
  }
  if (found.single != topology::kNone) {
    found.groups = 1;
    return found;
  }
  int best_capacity = 0;
  int level = -1;
  std::vector<int> caps;
  for (const SwitchId s : topo.SwitchesByLevel()) {
    const topology::Switch& sw = topo.GetSwitch(s);
    if (found.domain != topology::kNone && sw.level > level) break;
    if (context.required_home != topology::kNone &&
        topo.LowestCommonSwitch(s, context.required_home) != s) {
      continue;
    }
    int capacity = 0;
    for (const GroupId g : sw.groups) capacity += cap[g];
    if (capacity < wanted) continue;
    // Fewest groups: the forced ones, then the largest others first.
    caps.clear();
    int sum = 0;
    for (const GroupId g : sw.groups) {
      if (context.group_required[g] > 0) {
        sum += cap[g];
      } else if (cap[g] > 0) {
        caps.push_back(cap[g]);
      }
    }
    std::sort(caps.begin(), caps.end(), std::greater<>());
    int k = static_cast<int>(context.forced.size());
    for (std::size_t i = 0; i < caps.size() && sum < wanted; ++i) {
      sum += caps[i];
      ++k;
    }
    if (sum < wanted) continue;
    const std::optional<int>& max_leaves = context.request.max_leaves;
    if (max_leaves && topo.Blocks().empty() && k > *max_leaves) continue;
    if (found.domain == topology::kNone || k < found.groups ||
        (k == found.groups && Better(fit, capacity, best_capacity))) {
      found.domain = s;
      found.groups = k;
      best_capacity = capacity;
      level = sw.level;
    }
  }
  return found;
}

// Tight fit with the fewest groups: after the forced ones, the set whose
// capacities, largest first, are the smallest in lexicographic order.
// Picking the largest member as small as possible keeps the largest free
// groups whole for the next wide job. `others` ascends by capacity.
void TightestGroups(const DomainContext& context, int slots, int remaining,
                    std::vector<GroupId> others, std::vector<GroupId>& chosen) {
  const std::span<const int> cap = context.group_cap;
  std::vector<int> prefix;
  for (; slots > 0 && remaining > 0; --slots) {
    prefix.assign(1, 0);
    for (const GroupId g : others) prefix.push_back(prefix.back() + cap[g]);
    const auto n = static_cast<int>(others.size());
    int pick = n - 1;
    for (int i = 0; i < n; ++i) {
      const int here = cap[others[i]];
      // The (slots - 1) largest others no larger than this one, without it.
      int end_index = i + 1;
      while (end_index < n && cap[others[end_index]] == here) ++end_index;
      int low = std::max(0, end_index - (slots - 1));
      int sum = prefix[end_index] - prefix[low];
      if (i >= low && slots > 1) {
        sum -= here;
        if (low > 0) sum += cap[others[--low]];
      }
      if (here + sum >= remaining) {
        pick = i;
        break;
      }
    }
    chosen.push_back(others[pick]);
    remaining -= cap[others[pick]];
    others.erase(others.begin() + pick);
  }
}

}  // namespace

bool ChooseLowestDomain(const DomainContext& context, Fit fit, std::vector<GroupId>& chosen) {
  const LowestSwitch found = FindLowestSwitch(context, fit);
  if (found.single != topology::kNone) {
    chosen.push_back(found.single);
    return true;
  }
  if (found.domain == topology::kNone) return false;
  const std::span<const int> cap = context.group_cap;
  chosen.assign(context.forced.begin(), context.forced.end());
  int remaining = context.wanted;
  for (const GroupId g : context.forced) remaining -= cap[g];
  std::vector<GroupId> others;  // by capacity as `fit` prefers, ties by id
  for (const GroupId g : context.topology.GetSwitch(found.domain).groups) {
    if (context.group_required[g] == 0 && cap[g] > 0) others.push_back(g);
  }
  if (fit == Fit::kTightest) {
    std::stable_sort(others.begin(), others.end(),
                     [&](GroupId a, GroupId b) { return cap[a] < cap[b]; });
    const int slots = found.groups - static_cast<int>(context.forced.size());
    TightestGroups(context, slots, remaining, std::move(others), chosen);
    return true;
  }
  // Largest first is also how FindLowestSwitch counted the fewest groups.
  std::stable_sort(others.begin(), others.end(),
                   [&](GroupId a, GroupId b) { return cap[a] > cap[b]; });
  for (std::size_t i = 0; i < others.size() && remaining > 0; ++i) {
    chosen.push_back(others[i]);
    remaining -= cap[others[i]];
  }
  return true;
}

}  // namespace cohort::plugin
