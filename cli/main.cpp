// SPDX-License-Identifier: Apache-2.0
// `cohort`: the command line of the Cohort scheduler.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands/commands.h"
#include "commands/slurm_commands.h"

int main(int argc, char** argv) {
  // One malloc arena: a second thread (the one `cohort run` watches its job
  // on) would map and fault in a heap of its own.
  ::mallopt(M_ARENA_MAX, 1);
  const std::vector<std::string> words(argv + std::min(argc, 1), argv + argc);
  // Run under one of Slurm's names (a link in libexec/cohort/slurm/), the
  // binary is that command.
  std::string_view program = argc > 0 ? std::string_view(argv[0]) : std::string_view("cohort");
  program = program.substr(program.rfind('/') + 1);
  const bool slurm = cohort::cli::IsSlurmCommand(program);
  int exit_code = 0;
  CLI::App app{slurm ? std::string(program) + ": Cohort's front-end of Slurm's command"
                     : "cohort: submit, inspect and manage jobs on a Cohort GPU cluster",
               std::string(slurm ? program : "cohort")};
  app.set_version_flag("-V,--version", slurm ? "slurm 22.05 (cohort 0.1.0)" : "cohort 0.1.0");
  if (slurm) {
    cohort::cli::AddSlurmCommand(app, program, exit_code, words);
  } else {
    app.require_subcommand(1);
    cohort::cli::AddCommands(app, exit_code, words);
  }
  try {
    if (slurm) {
      // Long options shortened as getopt takes them (squeue --job=12).
      absl::StatusOr<std::vector<std::string>> args =
          cohort::cli::ExpandLongOptions(app, words, cohort::cli::TakesCommand(program));
      if (!args.ok()) throw CLI::ArgumentMismatch(std::string(args.status().message()));
      std::reverse(args->begin(), args->end());  // CLI11 reads a vector from the back
      app.parse(*args);
    } else {
      app.parse(argc, argv);
    }
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    // Slurm's commands exit 1 for any mistake in their command line.
    if (slurm) exit_code = cohort::cli::SlurmStatus(exit_code);
  }
  // Every command has finished its work and closed what it wrote; the
  // destructors of static objects (protobuf's default instances, CLI11's
  // tables) would only give memory back to a process about to end.
  std::fflush(nullptr);
  std::_Exit(exit_code);
}
