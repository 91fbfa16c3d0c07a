// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace cohort::controller {

/// The controller's logger of one subsystem (`controller`, `rpc`, `sched`,
/// `launch`, `store`), made from the default logger on first use. Any thread.
[[nodiscard]] std::shared_ptr<spdlog::logger> Log(const std::string& name);

}  // namespace cohort::controller
