// SPDX-License-Identifier: Apache-2.0
// cohort-controller: the cluster's controller service. The service is
// ControllerServer (controller_server.h); this parses its flags and, when a
// run asks it, executes the program again.
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "controller_server.h"
#include "exec_again.h"

namespace {

using cohort::controller::ExecuteAgain;
using cohort::controller::FlushLogs;
using cohort::controller::ServerExit;
using cohort::controller::ServerFlags;

void AddFlags(CLI::App& app, ServerFlags& flags) {
  flags.config_path = std::getenv("COHORT_CONF") != nullptr ? std::getenv("COHORT_CONF")
                                                            : "/etc/cohort/cohort.conf";
  app.add_option("-c,--config", flags.config_path,
                 "cohort.conf (default: $COHORT_CONF or /etc/cohort/cohort.conf)");
  app.add_option("--listen", flags.listen,
                 "TCP address to listen on (default: the ControllerAddr entry that names this "
                 "host, else the first)");
  app.add_option("--port", flags.port, "TCP port (default: ControllerPort; 0 picks a free one)");
  app.add_option("--state-dir", flags.state_dir,
                 "state folder, home of the local socket (default: StateDir)");
  app.add_option("--port-file", flags.port_file, "write the TCP port listened on to this file");
  app.add_option(
      "--http-port", flags.http_port,
      "HTTP port for the dashboard, /metrics and /api/v1/ (default: HttpPort, else none; 0 "
      "picks a free one)");
  app.add_option("--http-port-file", flags.http_port_file,
                 "write the HTTP port listened on to this file");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn or error");
  app.add_flag("--wait-for-database", flags.wait_for_database,
               "with StateBackend=postgresql, wait for the state database to answer instead of "
               "exiting (a controller that lost its lease starts again with it)");
  app.add_flag("--check-state", flags.check_state,
               "check the state database (StateDir/state.db, or StateDatabase=) and summarise it, "
               "then exit");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort-controller: the Cohort cluster's controller service", "cohort-controller"};
  ServerFlags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  // Where a run cannot return (its servers were left running), it leaves
  // through here.
  cohort::controller::ControllerServer server(flags, [&](const ServerExit& end) {
    if (!end.again_because.empty()) (void)ExecuteAgain(argc, argv, end);
    FlushLogs();
    std::_Exit(end.again_because.empty() ? end.status : 1);
  });
  const ServerExit end = server.Run();
  if (!end.again_because.empty()) return ExecuteAgain(argc, argv, end);
  return end.status;
}
