// SPDX-License-Identifier: Apache-2.0
#include "controller_log.h"

namespace cohort::controller {

std::shared_ptr<spdlog::logger> Log(const std::string& name) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get(name);
  if (!logger) {
    logger = spdlog::default_logger()->clone(name);
    spdlog::register_logger(logger);
  }
  return logger;
}

}  // namespace cohort::controller
