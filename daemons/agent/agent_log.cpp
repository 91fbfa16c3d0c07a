// SPDX-License-Identifier: Apache-2.0
#include "agent_log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string.h>

#include <memory>
#include <string>

namespace cohort::agent {
namespace {

std::shared_ptr<spdlog::logger> Named(const std::string& name) {
  if (std::shared_ptr<spdlog::logger> existing = spdlog::get(name)) return existing;
  return spdlog::stderr_color_mt(name);
}

}  // namespace

spdlog::logger& AgentLog() {
  // Function-local statics: created once, thread-safely, on first use.
  static const std::shared_ptr<spdlog::logger> logger = Named("agent");
  return *logger;
}

spdlog::logger& LaunchLog() {
  static const std::shared_ptr<spdlog::logger> logger = Named("launch");
  return *logger;
}

std::string SignalName(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name != nullptr ? name : std::to_string(signal);
}

void ConfigureLogging(std::string_view level) {
  // Create both before setting levels: set_level reaches registered loggers only.
  (void)AgentLog();
  (void)LaunchLog();
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %n %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace cohort::agent
