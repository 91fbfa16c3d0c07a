// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

/// cohort-stepd: the process that starts and reaps one launch's ranks, so
/// that they outlive a restart of the agent.
namespace cohort::step {

/// Runs the launch in `folder` (written by the agent: launch.json, maybe a
/// script) to its end: leaves the agent's session (setsid), starts every
/// rank (SpawnRanks) or none (on a failure the started ones are killed and
/// reaped), reaps them all, and appends each event to `folder`/events, then
/// `done`. After each event but `stepd` and `started` (the agent waits for
/// `pgid`) it pokes the agent's socket. Returns the process's exit
/// status: 0 after `done`, 1 when not even the event file could be opened.
/// Single-threaded by design: it forks.
[[nodiscard]] int RunStepDaemon(const std::string& folder);

}  // namespace cohort::step
