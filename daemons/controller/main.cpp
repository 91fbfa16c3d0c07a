// SPDX-License-Identifier: Apache-2.0
// cohort-controller: the cluster's controller service. The service is
// ControllerServer (controller_server.h); this parses its flags and, when a
// run asks it, executes the program again.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "controller_server.h"

namespace {

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
  app.add_flag("--check-state", flags.check_state,
               "check the state database (StateDir/state.db, or StateDatabase=) and summarise it, "
               "then exit");
}

// The command line of the controller again, listening where it listens now.
std::vector<std::string> ArgumentsAgain(int argc, char** argv, const ServerExit& reload) {
  std::vector<std::string> out{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--port" || arg == "--http-port") {
      ++i;  // and its value
      continue;
    }
    if (arg.starts_with("--port=") || arg.starts_with("--http-port=")) continue;
    out.emplace_back(arg);
  }
  out.insert(out.end(), {"--port", std::to_string(reload.port)});
  if (reload.http_port >= 0)
    out.insert(out.end(), {"--http-port", std::to_string(reload.http_port)});
  return out;
}

// Runs this program again in this process, listening where it listens now.
int ExecuteAgain(int argc, char** argv, const ServerExit& reload, std::string_view why) {
  std::vector<std::string> again = ArgumentsAgain(argc, argv, reload);
  std::vector<char*> pointers;
  for (std::string& arg : again) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  spdlog::info("controller_restarting reason=\"{}\"", why);
  spdlog::shutdown();
  ::execv("/proc/self/exe", pointers.data());
  std::cerr << fmt::format("cohort-controller: cannot execute itself again ({}); start it again\n",
                           std::strerror(errno));
  return 1;
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
    if (!end.again_because.empty()) (void)ExecuteAgain(argc, argv, end, end.again_because);
    spdlog::shutdown();
    std::_Exit(end.again_because.empty() ? end.status : 1);
  });
  const ServerExit end = server.Run();
  if (!end.again_because.empty()) return ExecuteAgain(argc, argv, end, end.again_because);
  return end.status;
}
