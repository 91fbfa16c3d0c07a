// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "cohort/v1/cohort.pb.h"
#include "launch_file.h"

namespace cohort::agent {

/// How many ranks a Launch starts on its node: 1 for a batch script, the
/// step's tasks here for a step, else the gang's tasks per node (at least 1:
/// zero is proto3's "unset").
[[nodiscard]] inline int LaunchTasks(const v1::Launch& launch) {
  if (launch.has_step()) return launch.step_layout().tasks();
  if (launch.batch()) return 1;
  if (launch.tasks_per_node() != 0) return launch.tasks_per_node();
  return launch.spec().tasks_per_node() != 0 ? launch.spec().tasks_per_node() : 1;
}

/// A launch's step for logs: "own" for the job's own launch, else its
/// number.
[[nodiscard]] inline std::string StepText(const step::LaunchId& id) {
  return id.step == step::kOwnLaunch ? std::string("own") : std::to_string(id.step);
}

}  // namespace cohort::agent
