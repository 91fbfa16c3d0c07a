// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/topology.h"
#include "cohort/engine/engine_types.h"

/// The engine's inputs as scenario lines, both ways: a recorded run (the
/// engine's random test) writes every input it handed the engine, and
/// `cohort-sim --script` reads them back under `agents: script`, where the
/// script, not the runner, speaks for the agents (docs/simulator.md).
namespace cohort::sim {

/// The scenario line of `input`, handed to the engine `at` seconds into the
/// run: `at 12 rank-exited 5 n003 code=1`. Nodes are named by `topology`.
[[nodiscard]] std::string FormatInput(const EngineInput& input, std::chrono::seconds at,
                                      const topology::Topology& topology);

/// A job as scenario lines name it: `12`, or `12_3` for a task of an array.
[[nodiscard]] std::string FormatJobRef(JobRef ref);
[[nodiscard]] std::optional<JobRef> ReadJobRef(std::string_view text);

/// Reads a line of one of the agents' and the clock's verbs (`register`,
/// `heartbeat`, `tick`, `schedule`, `rank-exited`, `released`,
/// `launch-failed`, `step`, `signal-step`, `step-rank-exited`,
/// `end-allocation`), its words after the verb in `words`; nullopt for any
/// other verb. An error says what the line lacks, as "VERB: …".
[[nodiscard]] std::optional<absl::StatusOr<EngineInput>> ReadInput(
    std::string_view verb, const std::vector<std::string>& words,
    const topology::Topology& topology);

}  // namespace cohort::sim
