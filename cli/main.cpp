// SPDX-License-Identifier: Apache-2.0
// `cohort`: the command line of the Cohort scheduler.
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"cohort: submit, inspect and manage jobs on a Cohort GPU cluster", "cohort"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cohort 0.1.0");
  int exit_code = 0;
  cohort::cli::AddSubmitCommand(app, exit_code);
  cohort::cli::AddRunCommand(app, exit_code);
  cohort::cli::AddQueueCommand(app, exit_code);
  cohort::cli::AddHistoryCommand(app, exit_code);
  cohort::cli::AddShowCommand(app, exit_code);
  cohort::cli::AddCancelCommand(app, exit_code);
  cohort::cli::AddControlCommands(app, exit_code);
  cohort::cli::AddWhyCommand(app, exit_code);
  cohort::cli::AddPriorityCommand(app, exit_code);
  cohort::cli::AddSharesCommand(app, exit_code);
  cohort::cli::AddNodesCommand(app, exit_code);
  cohort::cli::AddDrainCommands(app, exit_code);
  cohort::cli::AddConfigCommands(app, exit_code);
  cohort::cli::AddTopologyCommands(app, exit_code);
  cohort::cli::AddHostlistCommands(app, exit_code);
  cohort::cli::AddPlaceCommand(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
