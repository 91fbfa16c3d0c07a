// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

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
/// Every input is an EngineInput (cohort/engine_types.h) handed to
/// Engine::Apply; the agents are played by the runner: a started job's
/// ranks exit 0 after its runtime, and stop at once when told to.
namespace cohort::sim {

/// The transcript of the scenario `text` (`origin` names it in errors);
/// InvalidArgument naming the line and the fix for a line it cannot read,
/// or a cluster whose configuration has errors.
[[nodiscard]] absl::StatusOr<std::string> RunScenario(std::string_view text,
                                                      std::string_view origin);

}  // namespace cohort::sim
