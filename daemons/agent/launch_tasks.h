// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/v1/cohort.pb.h"

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

}  // namespace cohort::agent
