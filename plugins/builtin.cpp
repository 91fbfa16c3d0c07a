// SPDX-License-Identifier: Apache-2.0
// Every built-in plugin, by the name cohort.conf chooses it by. A new policy
// is a new file in plugins/<kind>/ and one line in the lists below.
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/plugin.h"
#include "plugins/admission/limits.h"
#include "plugins/admission/require_time_limit.h"
#include "plugins/domain/spread.h"
#include "plugins/domain/tightest.h"
#include "plugins/filter/keep_gpu_nodes.h"
#include "plugins/filter/resources.h"
#include "plugins/priority/fifo.h"
#include "plugins/priority/multifactor.h"
#include "plugins/score/locality.h"
#include "plugins/score/spread.h"

namespace cohort::plugin {

namespace {

template <class Seam>
struct Entry {
  std::string_view name;
  std::shared_ptr<const Seam> (*make)();
};

template <class Seam, class Policy>
std::shared_ptr<const Seam> Make() {
  return std::make_shared<const Policy>();
}

// A policy's entry, under the name it declares (Policy::kName).
template <class Seam, class Policy>
constexpr Entry<Seam> Of() {
  return {Policy::kName, &Make<Seam, Policy>};
}

// NodeFilterPlugins=
constexpr Entry<NodeFilter> kNodeFilters[] = {
    Of<NodeFilter, ResourcesFilter>(),
    Of<NodeFilter, KeepGpuNodesFilter>(),
};

// NodeScoreType=
constexpr Entry<NodeScore> kNodeScores[] = {
    Of<NodeScore, LocalityScore>(),
    Of<NodeScore, SpreadScore>(),
};

// DomainScoreType=
constexpr Entry<DomainScore> kDomainScores[] = {
    Of<DomainScore, TightestDomain>(),
    Of<DomainScore, SpreadDomain>(),
};

// PriorityType=
constexpr Entry<QueueOrder> kQueueOrders[] = {
    Of<QueueOrder, MultifactorOrder>(),
    Of<QueueOrder, FifoOrder>(),
};

// AdmissionPlugins=
constexpr Entry<AdmissionCheck> kAdmissions[] = {
    Of<AdmissionCheck, LimitsAdmission>(),
    Of<AdmissionCheck, RequireTimeLimitAdmission>(),
};

template <class Seam>
absl::StatusOr<std::shared_ptr<const Seam>> Find(std::span<const Entry<Seam>> entries,
                                                 std::string_view key, std::string_view name) {
  std::vector<std::string_view> known;
  for (const Entry<Seam>& entry : entries) {
    if (entry.name == name) return entry.make();
    known.push_back(entry.name);
  }
  return absl::InvalidArgumentError(
      fmt::format("{}={}: no such plugin; choose one of {}", key, name, fmt::join(known, ", ")));
}

// The policies of a list key, in its order; `what` names one in the error
// for a name listed twice.
template <class Seam>
absl::StatusOr<std::vector<std::shared_ptr<const Seam>>> MakeList(
    std::span<const Entry<Seam>> entries, std::string_view key,
    const std::vector<std::string>& names, std::string_view what) {
  std::vector<std::shared_ptr<const Seam>> made;
  std::set<std::string_view> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(fmt::format("{}={}: {} is listed twice; list each {} once",
                                                    key, fmt::join(names, ","), name, what));
    }
    absl::StatusOr<std::shared_ptr<const Seam>> one = Find<Seam>(entries, key, name);
    if (!one.ok()) return one.status();
    made.push_back(*std::move(one));
  }
  return made;
}

absl::StatusOr<std::vector<std::shared_ptr<const NodeFilter>>> MakeFilters(
    const std::vector<std::string>& names) {
  constexpr std::string_view kKey = "NodeFilterPlugins";
  constexpr std::string_view kRequired = ResourcesFilter::kName;
  if (names.empty() || names.front() != kRequired) {
    return absl::InvalidArgumentError(fmt::format(
        "{}={}: the list must begin with {}, which alone checks node state, free resources, "
        "features and exclusivity (without it gangs would be placed on busy or down nodes) and "
        "whose counts the pending reasons quote; add it first",
        kKey, fmt::join(names, ","), kRequired));
  }
  return MakeList<NodeFilter>(kNodeFilters, kKey, names, "filter");
}

}  // namespace

absl::StatusOr<PluginSet> MakePlugins(const config::PluginChoice& choice) {
  PluginSet set;
  absl::StatusOr<std::vector<std::shared_ptr<const NodeFilter>>> filters =
      MakeFilters(choice.node_filter);
  if (!filters.ok()) return filters.status();
  set.allocator.node_filters = *std::move(filters);
  absl::StatusOr<std::shared_ptr<const NodeScore>> score =
      Find<NodeScore>(kNodeScores, "NodeScoreType", choice.node_score);
  if (!score.ok()) return score.status();
  set.allocator.node_score = *std::move(score);
  absl::StatusOr<std::shared_ptr<const DomainScore>> domain =
      Find<DomainScore>(kDomainScores, "DomainScoreType", choice.domain_score);
  if (!domain.ok()) return domain.status();
  set.allocator.domain_score = *std::move(domain);
  absl::StatusOr<std::shared_ptr<const QueueOrder>> order =
      Find<QueueOrder>(kQueueOrders, "PriorityType", choice.queue_order);
  if (!order.ok()) return order.status();
  set.queue_order = *std::move(order);
  absl::StatusOr<std::vector<std::shared_ptr<const AdmissionCheck>>> admission =
      MakeList<AdmissionCheck>(kAdmissions, "AdmissionPlugins", choice.admission,
                               "admission policy");
  if (!admission.ok()) return admission.status();
  set.admission = *std::move(admission);
  return set;
}

std::shared_ptr<const AllocatorPlugins> DefaultAllocatorPlugins() {
  // Made on first use and never changed: the plugins are stateless, so every
  // allocator of every thread may share them.
  static const std::shared_ptr<const AllocatorPlugins> defaults = [] {
    absl::StatusOr<PluginSet> made = MakePlugins(config::PluginChoice{});
    COHORT_CHECK(made.ok(), "the default plugins are registered in plugins/builtin.cpp");
    return std::make_shared<const AllocatorPlugins>(std::move(made->allocator));
  }();
  return defaults;
}

}  // namespace cohort::plugin
