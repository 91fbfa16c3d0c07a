// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <spdlog/logger.h>

#include <string>
#include <string_view>

/// The agent's named loggers. Lines read `event key=value …`.
namespace cohort::agent {

/// `agent`: the node's link to the controller and the agent's own life.
/// Safe from any thread.
[[nodiscard]] spdlog::logger& AgentLog();

/// `launch`: ranks started, signalled and reaped. Safe from any thread.
[[nodiscard]] spdlog::logger& LaunchLog();

/// A signal's short name for log lines (TERM, KILL), or its number.
[[nodiscard]] std::string SignalName(int signal);

/// Sets the level (trace, debug, info, warn, error, critical, off) and the
/// line format of every logger, to stderr. Call once, before the loop runs.
void ConfigureLogging(std::string_view level);

}  // namespace cohort::agent
