// SPDX-License-Identifier: Apache-2.0
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster_files.h"
#include "cohort/fmt_absl.h"
#include "commands.h"
#include "controller_client.h"
#include "job_option_table.h"
#include "job_options.h"

namespace cohort::cli {
namespace {

struct SubmitState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
};

int Submit(const SubmitState& state, const std::vector<std::string>& remaining) {
  absl::StatusOr<Command> command = SplitCommand(remaining, "submit");
  if (!command.ok()) {
    std::cerr << fmt::format("cohort: {}\n", command.status());
    return 2;
  }
  if (command->words.empty()) {
    std::cerr << "cohort: submit needs a batch script or a command: cohort submit [options] "
                 "SCRIPT [ARGS...], or cohort submit [options] -- COMMAND [ARGS...]\n";
    return 2;
  }
  for (const std::string& name : GivenUnsupported(state.unsupported)) {
    std::cerr << fmt::format("cohort: warning: {} is not supported yet; ignored\n", name);
  }

  JobOptions options = state.options;
  const std::string& program = command->words.front();
  std::string script;
  if (!command->after_dashes) {
    absl::StatusOr<std::string> text = shell::ReadFile(program);
    if (!text.ok()) {
      std::cerr << fmt::format(
          "cohort: {}; give the path of a batch script, or run a command with cohort submit -- "
          "COMMAND\n",
          text.status());
      return 2;
    }
    if (!text->starts_with("#!")) {
      std::cerr << fmt::format(
          "cohort: {} does not start with #! (such as #!/bin/bash); a batch script names its "
          "interpreter on its first line. To run a program, use cohort submit [options] -- {}\n",
          program, program);
      return 2;
    }
    if (absl::Status applied = ApplyDirectives(*text, program, options); !applied.ok()) {
      std::cerr << fmt::format("cohort: {}\n", applied);
      return 2;
    }
    script = *std::move(text);
  }

  absl::StatusOr<v1::JobSpec> spec =
      BuildJobSpec(options, std::filesystem::path(program).filename().string());
  if (!spec.ok()) {
    std::cerr << fmt::format("cohort: {}\n", spec.status());
    return 2;
  }
  for (const std::string& word : command->words) spec->add_argv(word);
  spec->set_script(script);

  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  request.set_test_only(options.test_only);
  if (options.test_only) PrintJobSpec(request.spec(), std::cout);

  return CallController(state.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::SubmitJobResponse> response = client.SubmitJob(request);
    if (!response.ok()) return response.status();
    if (options.test_only) {
      PrintTestOnlyAnswer(*response, std::cout);
    } else if (options.parsable) {
      std::cout << response->job_id() << '\n';
    } else {
      std::cout << fmt::format("Submitted job {}\n", response->job_id());
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddSubmitCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<SubmitState>();
  CLI::App* submit = app.add_subcommand(
      "submit", "submit a batch script, or a command, to run as one job (like sbatch)");
  state->unsupported = AddJobOptions(*submit, state->options, words);
  AddConnectionOptions(*submit, state->connection, ConfigShortName::kNone);
  TakeCommandVerbatim(*submit, "SCRIPT",
                      "a batch script and its arguments, or -- and a command with its arguments; "
                      "everything after it is passed on, not read as options");
  submit->footer(
      "Usage:\n"
      "  cohort submit [options] SCRIPT [ARGS...]   the script's text is sent and run with ARGS\n"
      "  cohort submit [options] -- CMD [ARGS...]   CMD runs as is on the nodes\n"
      "\n"
      "A script may set options in #SBATCH or #COHORT lines at its top (before its first\n"
      "command), as with sbatch; #COHORT lines win over #SBATCH ones, and the command line over\n"
      "both. sbatch options that Cohort does not support yet are warned about and ignored.\n"
      "Prints `Submitted job N` (with --parsable, only N); for an --array, N is the array's id\n"
      "and its tasks are N_0, N_1, ... Exit: 0 submitted, 1 the controller refused or cannot be\n"
      "reached, 2 invalid options or script.");
  submit->callback(
      [state, submit, &exit_code] { exit_code = Submit(*state, submit->remaining()); });
}

}  // namespace cohort::cli
