// SPDX-License-Identifier: Apache-2.0
// `cohort-agent`: runs a node's ranks for the Cohort controller.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent.h"
#include "agent_log.h"
#include "agent_options.h"

namespace {

// Descriptors 0-2 are where ranks' stdio is mapped; if the agent was started
// without them, the files it opens would take those numbers.
void KeepStandardDescriptorsOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
}

}  // namespace

int main(int argc, char** argv) {
  KeepStandardDescriptorsOpen();
  CLI::App app{
      "cohort-agent: the node agent of Cohort. Registers this node (or, with --emulate, several "
      "emulated ones) with the controller over one gRPC stream each, and starts, signals and "
      "watches the ranks the controller launches on it (each launch runs under its own "
      "cohort-stepd).",
      "cohort-agent"};
  app.footer(
      "Stopping: SIGINT or SIGTERM stops the agent gracefully: it closes its streams and exits "
      "WITHOUT killing the ranks it started; they keep running under their cohort-stepd. An "
      "agent started again on the same --spool adopts them and reports the exits it missed, so "
      "upgrading or restarting the agent loses no job. To stop a job, cancel it (cohort cancel). "
      "A second SIGINT or SIGTERM exits at once.\n"
      "When the controller is unreachable or refuses the node, the agent keeps its ranks running "
      "and retries (100 ms doubling to 5 s).");
  app.set_version_flag("--version", "cohort-agent 0.1.0");
  cohort::agent::AgentOptions options;
  cohort::agent::AddAgentOptions(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (options.print_node) {
    absl::StatusOr<std::string> node = cohort::agent::DescribeNode(options);
    if (!node.ok()) {
      std::cerr << "cohort-agent: error: " << std::string_view(node.status().message()) << "\n";
      return 1;
    }
    std::cout << *node;
    return 0;
  }
  cohort::agent::ConfigureLogging(options.log_level);
  absl::StatusOr<cohort::agent::AgentSettings> settings = cohort::agent::ResolveSettings(options);
  if (!settings.ok()) {
    std::cerr << "cohort-agent: error: " << std::string_view(settings.status().message()) << "\n";
    return 1;
  }
  const absl::Status status = cohort::agent::RunAgent(*std::move(settings));
  if (!status.ok()) {
    std::cerr << "cohort-agent: error: " << std::string_view(status.message()) << "\n";
    return 1;
  }
  return 0;
}
