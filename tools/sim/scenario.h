// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"

/// Scenarios: a cluster and what happens to it, one line each, played on
/// the real engine in virtual time; the answer is a transcript of what the
/// engine decided. `cohort-sim --script FILE` prints it; the files of
/// tests/data/scenarios/ are compared with the transcripts they expect
/// (docs/simulator.md, "Scenarios", has the format).
///
///     # two gangs on one leaf of four nodes
///     topology: SwitchName=leaf1 Nodes=n[1-4]
///     config: NodeName=n[1-4] CPUs=8 MemoryMB=64000 Gpus=8
///     config: PartitionName=all Nodes=ALL Default=YES MaxTime=1-0
///     at 0 submit nodes=4 gpus=8 runtime=600
///     at 0 submit nodes=2 gpus=8 runtime=60 time=2
///     run 900
///
/// Every input is an EngineInput (cohort/engine/engine_types.h) handed to
/// Engine::Apply; the agents are played by the runner (a started job's
/// ranks exit 0 after its runtime, and stop at once when told to), or,
/// under `agents: script`, by the lines themselves (raw_inputs.h).
namespace cohort::sim {

/// A cluster as a scenario's `config:` and `topology:` lines give it (no
/// topology: one flat switch).
struct ScenarioCluster {
  config::ClusterConfig config;
  std::unique_ptr<topology::Topology> topology;
  alloc::NodePool pool;
};
/// InvalidArgument, naming `origin` and listing the errors, for lines with
/// errors.
[[nodiscard]] absl::StatusOr<ScenarioCluster> BuildCluster(std::string_view config_text,
                                                           std::string_view topology_text,
                                                           std::string_view origin);

/// The transcript of the scenario `text` (`origin` names it in errors);
/// InvalidArgument naming the line and the fix for a line it cannot read,
/// or a cluster whose configuration has errors.
[[nodiscard]] absl::StatusOr<std::string> RunScenario(std::string_view text,
                                                      std::string_view origin);

}  // namespace cohort::sim
