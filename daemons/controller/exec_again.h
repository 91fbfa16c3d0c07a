// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "controller_server.h"

namespace cohort::controller {

/// Writes out what the loggers hold, and keeps them: the servers a run
/// leaves behind still log from their own threads until the process ends or
/// executes again (after spdlog::shutdown() the default logger would be null
/// to them, a segmentation fault).
void FlushLogs();

/// Executes cohort-controller again in this process, with the flags of
/// `argv` and listening where `end` says, because of `end.again_because`.
/// Every descriptor but the standard three is closed on the way: a run that
/// lost its lease leaves its servers open, and Boost.Asio's sockets are not
/// close-on-exec. Returns 1 only when the exec failed, said on stderr.
int ExecuteAgain(int argc, char** argv, const ServerExit& end);

}  // namespace cohort::controller
