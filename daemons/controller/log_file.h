// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/status.h"

/// LogFile=: the controller's log in a file instead of stderr, reopened on
/// request so that logrotate can move it away (SIGUSR2, as slurmctld's, or
/// SIGHUP).
namespace cohort::controller {

/// Sends the default logger (and every logger cloned from it afterwards:
/// call before the first Log()) to `path`, appending. The errno's status,
/// naming the file, when it cannot be opened; the logger is unchanged then.
[[nodiscard]] absl::Status LogToFile(const std::string& path);

/// Closes the log file and opens it again by its name (a new file once
/// logrotate moved the old one). Nothing when logging goes to stderr. Any
/// thread; lines being written wait for it.
void ReopenLogFile();

}  // namespace cohort::controller
