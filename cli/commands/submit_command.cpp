// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster_files.h"
#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "commands/job_follow.h"
#include "commands/slurm_commands.h"
#include "spec/job_option_table.h"
#include "spec/job_options.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

// Which command the user ran: `cohort submit` or Slurm's `sbatch`, which
// differ only in what they print and their exit status for a mistake.
enum class Flavour { kCohort, kSbatch };

struct SubmitState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
  Flavour flavour = Flavour::kCohort;
};

// Where the script is read from when none is named, as sbatch does.
constexpr std::string_view kStdin = "/dev/stdin";

// The script sbatch --wrap makes of a command line.
std::string WrapScript(const std::string& command) {
  return fmt::format("#!/bin/sh\n# made by --wrap\n{}\n", command);
}

int Submit(const SubmitState& state, const std::vector<std::string>& remaining) {
  absl::StatusOr<Command> command = SplitCommand(remaining, "submit");
  if (!command.ok()) {
    std::cerr << fmt::format("cohort: {}\n", command.status());
    return 2;
  }
  const JobOptions& given = state.options;
  if (given.wrap && !command->words.empty()) {
    std::cerr << fmt::format(
        "cohort: --wrap runs its own command; {} cannot be given too: put it in --wrap, or leave "
        "--wrap out\n",
        ShellQuote(command->words.front()));
    return 2;
  }
  // As sbatch, without a script the script is read from stdin, unless that
  // is a terminal.
  if (command->words.empty() && !given.wrap && isatty(STDIN_FILENO) == 0) {
    command->words.emplace_back(kStdin);
  }
  if (command->words.empty() && !given.wrap) {
    std::cerr << "cohort: submit needs a batch script or a command: cohort submit [options] "
                 "SCRIPT [ARGS...], cohort submit [options] -- COMMAND [ARGS...], or --wrap "
                 "\"COMMAND\"\n";
    return 2;
  }
  if (absl::Status refused = CheckNotImplemented(state.unsupported); !refused.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refused.message());
    return 2;
  }

  JobOptions options = state.options;
  // sbatch's SBATCH_* variables: below the command line, above the script.
  if (state.flavour == Flavour::kSbatch) {
    if (absl::Status read = ApplyInputVariables("SBATCH_", options); !read.ok()) {
      std::cerr << fmt::format("sbatch: error: {}\n", read.message());
      return 2;
    }
  }
  std::string script;
  if (options.wrap) {
    script = WrapScript(*options.wrap);
    command->words = {"wrap"};
  }
  const std::string& program = command->words.front();
  if (!command->after_dashes && !options.wrap) {
    absl::StatusOr<std::string> text = shell::ReadFile(program);
    if (!text.ok()) {
      std::cerr << fmt::format(
          "cohort: {}; give the path of a batch script, or run a command with cohort submit -- "
          "COMMAND\n",
          text.status());
      return 2;
    }
    if (!text->starts_with("#!") && program == kStdin) {
      std::cerr << "cohort: no script given, and what stdin holds is not one (it does not start "
                   "with #!); name a script, or give -- COMMAND or --wrap \"COMMAND\"\n";
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

  const std::string default_name = program == kStdin
                                       ? std::string("sbatch")
                                       : std::filesystem::path(program).filename().string();
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, default_name);
  if (!spec.ok()) {
    std::cerr << fmt::format("cohort: {}\n", spec.status());
    return 2;
  }
  for (const std::string& word : command->words) spec->add_argv(word);
  spec->set_script(script);
  // sbatch's own default file, where scripts and their users look for the
  // output: slurm-<id>.out, an array's slurm-<array id>_<task>.out.
  if (state.flavour == Flavour::kSbatch && spec->output().empty()) {
    spec->set_output(spec->array().empty() ? "slurm-%j.out" : "slurm-%A_%a.out");
  }

  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  request.set_test_only(options.test_only);
  if (options.test_only) PrintJobSpec(request.spec(), std::cout);

  int job_status = 0;
  const int status =
      CallController(state.connection, [&](ControllerClient& client) -> absl::Status {
        absl::StatusOr<v1::SubmitJobResponse> response = client.SubmitJob(request);
        if (!response.ok()) return response.status();
        if (options.test_only) {
          PrintTestOnlyAnswer(*response, std::cout);
        } else if (options.parsable) {
          std::cout << response->job_id() << std::endl;
        } else {
          std::cout << fmt::format("Submitted {}job {}",
                                   state.flavour == Flavour::kSbatch ? "batch " : "",
                                   response->job_id())
                    << std::endl;
        }
        if (const std::optional<std::chrono::seconds> within = ImmediateOf(options);
            within && !options.test_only) {
          if (absl::Status started = StartsWithin(client, response->job_id(), *within);
              !started.ok()) {
            return started;
          }
        }
        if (options.wait && !options.test_only) {
          CatchInterrupts();
          job_status = FollowJob(client, response->job_id(), std::nullopt, RankLabels::kNone);
        }
        return absl::OkStatus();
      });
  return status != 0 ? status : job_status;
}

// The options of `cohort submit` and `sbatch`, on `command`.
void ConfigureSubmit(CLI::App& command, SubmitState& state, CommandWords words) {
  state.unsupported = AddJobOptions(command, state.options, words);
  command
      .add_option("--wrap", state.options.wrap,
                  "run this command line as the job's batch script (with /bin/sh), instead "
                  "of a script file")
      ->type_name("COMMAND")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->group("Job options (as sbatch's)");
  command
      .add_flag("-W,--wait", state.options.wait,
                "wait for the job to end, then exit with its status (0 when it completed, "
                "else its exit code or 1)")
      ->group("Job options (as sbatch's)");
  AddConnectionOptions(command, state.connection, ConfigShortName::kNone);
  TakeCommandVerbatim(command, "SCRIPT",
                      "a batch script and its arguments, or -- and a command with its arguments; "
                      "everything after it is passed on, not read as options");
}

}  // namespace

void AddSubmitCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<SubmitState>();
  CLI::App* submit = app.add_subcommand(
      "submit", "submit a batch script, or a command, to run as one job (like sbatch)");
  ConfigureSubmit(*submit, *state, words);
  submit->footer(
      "Usage:\n"
      "  cohort submit [options] SCRIPT [ARGS...]   the script's text is sent and run with ARGS\n"
      "  cohort submit [options] -- CMD [ARGS...]   CMD runs as is on the nodes\n"
      "\n"
      "A script may set options in #SBATCH or #COHORT lines at its top (before its first\n"
      "command), as with sbatch; #COHORT lines win over #SBATCH ones, and the command line over\n"
      "both. sbatch options that Cohort does not implement are refused with the closest\n"
      "alternative, except those that change nothing it does (docs/slurm.md lists them).\n"
      "Prints `Submitted job N` (with --parsable, only N); for an --array, N is the array's id\n"
      "and its tasks are N_0, N_1, ... Exit: 0 submitted, 1 the controller refused or cannot be\n"
      "reached, 2 invalid options or script; with -W, the job's status.");
  submit->callback(
      [state, submit, &exit_code] { exit_code = Submit(*state, submit->remaining()); });
}

void AddSbatchCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<SubmitState>();
  state->flavour = Flavour::kSbatch;
  ConfigureSubmit(app, *state, words);
  app.footer(
      "Cohort's sbatch: submits a batch script as `cohort submit` does and prints `Submitted\n"
      "batch job N` (with --parsable, N). Exit: 0 submitted, 1 anything else; with -W, the\n"
      "job's status. See docs/slurm.md for what differs from Slurm's sbatch.");
  app.callback([state, &app, &exit_code] {
    const int status = Submit(*state, app.remaining());
    // With -W, a job's own exit status passes through as it is.
    exit_code = state->options.wait ? status : SlurmStatus(status);
  });
}

}  // namespace cohort::cli
