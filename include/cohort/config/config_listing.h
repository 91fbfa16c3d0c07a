// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cohort/config/cluster_config.h"

namespace cohort::config {

/// One line of `scontrol show config`: a key and its value in force.
struct ConfigLine {
  std::string name;
  std::string value;
};

/// The cluster-wide settings of `config` as `scontrol show config` lists
/// them, sorted by name: Slurm's name where slurm.conf has the same setting
/// (SlurmdTimeout for NodeTimeout, StateSaveLocation for StateDir), else
/// cohort.conf's; durations as Slurm prints them ("300 sec", or
/// D-HH:MM:SS for the priority periods); "(null)" where nothing is set.
/// Nodes, partitions, QOS and accounts are listed by their own commands.
/// `finished_kept_s` is how long ended jobs stay in the queue (MinJobAge).
[[nodiscard]] std::vector<ConfigLine> ListConfig(const ClusterConfig& config,
                                                 std::int64_t finished_kept_s);

}  // namespace cohort::config
