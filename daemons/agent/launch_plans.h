// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/launch/binding.h"
#include "cohort/launch/node_layout.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "launch_file.h"

/// A launch as a node plans it, whichever runner runs it. Pure.
namespace cohort::agent {

/// Each local rank's GPUs, CPUs, NUMA node and NICs on `layout`, the CPUs
/// among `cpus` (the launch's grant; empty: the whole node).
[[nodiscard]] absl::StatusOr<std::vector<binding::RankBinding>> PlanBindings(
    const layout::NodeLayout& layout, const v1::Launch& launch, std::span<const int> cpus);

/// The bindings as RanksStarted reports them, by global rank.
[[nodiscard]] std::vector<v1::RankBinding> ReportBindings(
    const std::vector<binding::RankBinding>& bindings, const v1::Launch& launch,
    const std::string& node);

/// What cohort-stepd is handed for `launch` on `node` (bindings not yet
/// set); `cluster_name` where the launch names none.
[[nodiscard]] step::LaunchPlan MakePlan(const v1::Launch& launch, const std::string& node,
                                        const std::string& cluster_name);

}  // namespace cohort::agent
