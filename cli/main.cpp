// SPDX-License-Identifier: Apache-2.0
// `cohort`: the command line of the Cohort scheduler.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  // One malloc arena: a second thread (the one `cohort run` watches its job
  // on) would map and fault in a heap of its own.
  ::mallopt(M_ARENA_MAX, 1);
  const std::vector<std::string> words(argv + std::min(argc, 1), argv + argc);
  CLI::App app{"cohort: submit, inspect and manage jobs on a Cohort GPU cluster", "cohort"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cohort 0.1.0");
  int exit_code = 0;
  cohort::cli::AddCommands(app, exit_code, words);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
  }
  // Every command has finished its work and closed what it wrote; the
  // destructors of static objects (protobuf's default instances, CLI11's
  // tables) would only give memory back to a process about to end.
  std::fflush(nullptr);
  std::_Exit(exit_code);
}
