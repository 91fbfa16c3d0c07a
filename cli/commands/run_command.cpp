// SPDX-License-Identifier: Apache-2.0
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/launch/mpi_type.h"
#include "commands/allocation.h"
#include "commands/commands.h"
#include "commands/job_follow.h"
#include "commands/run_step.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/rank_output.h"
#include "spec/job_option_table.h"
#include "spec/job_options.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct RunState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
  bool label = false;
  std::string jobid;        ///< --jobid: run as a step of this job
  bool exact = false;       ///< --exact: a step holds only what its tasks ask
  bool overlap = false;     ///< --overlap: a step shares with every other step
  std::string input = "0";  ///< --input: the step's rank that reads stdin, or none
  bool pty = false;         ///< --pty: one task of the step on a terminal
  std::string mpi;          ///< --mpi (or SLURM_MPI_TYPE): canonical; empty: MpiDefault
};

// Whether our stdin is data to pass on (a pipe, a file, a socket), as in
// `echo x | srun cat` or `srun sort <file`. A terminal is left to --pty
// (its keys are typed at the step's own terminal) and /dev/null has none.
bool StdinIsData() {
  struct stat info {};
  if (::fstat(STDIN_FILENO, &info) != 0) return false;
  return S_ISFIFO(info.st_mode) || S_ISREG(info.st_mode) || S_ISSOCK(info.st_mode);
}

// The job whose allocation `cohort run` runs in: --jobid, else the job it
// runs inside (COHORT_JOB_ID, which every batch script and rank has); none
// outside a job.
std::string AllocationOf(const RunState& state) {
  if (!state.jobid.empty()) return state.jobid;
  const char* inside = std::getenv("COHORT_JOB_ID");
  return inside != nullptr ? std::string(inside) : std::string();
}

int Run(const RunState& state, const std::vector<std::string>& remaining) {
  if (state.mpi == "list") {
    // Slurm's words, which scripts grep.
    std::cout << "MPI plugin types are...\n";
    std::string_view types = launch::kMpiTypes;
    while (!types.empty()) {
      const std::size_t comma = types.find(", ");
      std::cout << "\t" << types.substr(0, comma) << "\n";
      types = comma == std::string_view::npos ? std::string_view() : types.substr(comma + 2);
    }
    return 0;
  }
  absl::StatusOr<Command> command = SplitCommand(remaining, "run");
  if (!command.ok()) {
    std::cerr << fmt::format("cohort: {}\n", command.status());
    return 2;
  }
  if (command->words.empty()) {
    std::cerr << "cohort: run needs a command: cohort run [options] -- COMMAND [ARGS...]\n";
    return 2;
  }
  if (absl::Status refused = CheckNotImplemented(state.unsupported); !refused.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refused.message());
    return 2;
  }
  const JobOptions& options = state.options;
  int stdin_rank = -1;
  if (state.input != "none") {
    const auto [end, ec] =
        std::from_chars(state.input.data(), state.input.data() + state.input.size(), stdin_rank);
    if (ec != std::errc() || end != state.input.data() + state.input.size() || stdin_rank < 0) {
      // Not a rank: a file, which rank 0 reads as this command's stdin.
      const int fd = ::open(state.input.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::cerr << fmt::format(
            "cohort: --input: {:?} is neither a rank (0, 1, ...), none, nor a file to read: {}\n",
            state.input, std::strerror(errno));
        return 2;
      }
      ::dup2(fd, STDIN_FILENO);
      ::close(fd);
      stdin_rank = 0;
    }
  }
  if (const std::string allocation = AllocationOf(state); !allocation.empty()) {
    absl::StatusOr<ControllerClient> client = ControllerClient::Connect(state.connection);
    if (!client.ok()) {
      std::cerr << fmt::format("cohort: {}\n", client.status());
      return 2;
    }
    // Inside an allocation Slurm's --exclusive means --exact, as of 21.08.
    const StepRun step{.job = allocation,
                       .sharing = state.overlap                      ? v1::STEP_OVERLAP
                                  : state.exact || options.exclusive ? v1::STEP_EXACT
                                                                     : v1::STEP_WHOLE_NODES,
                       .labels = state.label ? RankLabels::kRank : RankLabels::kNone,
                       .stdin_rank = stdin_rank,
                       .terminal = state.pty ? StepTerminal::kPty : StepTerminal::kNone,
                       .mpi = state.mpi};
    return RunStep(*client, options, step, command->words);
  }
  if (state.exact || state.overlap) {
    std::cerr << "cohort: run: --exact and --overlap shape steps inside a job; outside one, run "
                 "starts a job of its own (see --exclusive)\n";
    return 2;
  }
  if (state.pty) {
    std::cerr << "cohort: run: --pty runs a step on a terminal inside a job: first cohort alloc "
                 "(or --jobid ID of a running job), then cohort run --pty bash\n";
    return 2;
  }
  if (options.array) {
    std::cerr << "cohort: run: --array makes many jobs, and run follows one; submit the array "
                 "with cohort submit --array, and watch it with cohort queue\n";
    return 2;
  }
  absl::StatusOr<v1::JobSpec> spec =
      BuildJobSpec(options, std::filesystem::path(command->words.front()).filename().string());
  if (!spec.ok()) {
    std::cerr << fmt::format("cohort: {}\n", spec.status());
    return 2;
  }
  for (const std::string& word : command->words) spec->add_argv(word);
  v1::SubmitJobRequest request;
  if (options.test_only) {
    *request.mutable_spec() = *std::move(spec);
    request.set_test_only(true);
    PrintJobSpec(request.spec(), std::cout);
    return CallController(state.connection, [&](ControllerClient& client) -> absl::Status {
      absl::StatusOr<v1::SubmitJobResponse> response = client.SubmitJob(request);
      if (!response.ok()) return response.status();
      PrintTestOnlyAnswer(*response, std::cout);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<ControllerClient> client = ControllerClient::Connect(state.connection);
  if (!client.ok()) {
    std::cerr << fmt::format("cohort: {}\n", client.status());
    return 2;
  }
  if (launch::MpiTypeNeedsServer(state.mpi) || spec->has_container() ||
      (stdin_rank >= 0 && StdinIsData())) {
    // As Slurm's srun outside a job: an allocation of the options' shape,
    // held from here, and the command as a step over all of it, whose
    // servers wire the ranks up, whose ranks run in the container, and
    // whose stream carries our stdin to its rank (the job's own launch has
    // none of these).
    return InAllocation(*client, *std::move(spec),
                        [&](const v1::Job& job, Watch& /*watch*/) {
                          const StepRun step{
                              .job = std::to_string(job.id()),
                              .labels = state.label ? RankLabels::kRank : RankLabels::kNone,
                              .stdin_rank = stdin_rank,
                              .mpi = state.mpi};
                          return RunStep(*client, options, step, command->words);
                        },
                        {.words = AllocationWords::kCohort,
                         .quiet = false,
                         .keep = false,
                         .immediate = ImmediateOf(options)});
  }

  // As the step's ranks get from RunStep above: where this command runs.
  SetLaunchHost(*spec->mutable_env(), StepIoHost(client->Address()));
  // The ranks' output files, which FollowJob prints.
  absl::StatusOr<std::optional<std::filesystem::path>> taken = TakeOutput(options, *spec);
  if (!taken.ok()) {
    std::cerr << fmt::format("cohort: {}\n", taken.status());
    return 1;
  }
  const std::optional<std::filesystem::path>& folder = *taken;

  // From here on an interrupt cancels the job rather than orphaning it.
  CatchInterrupts();
  *request.mutable_spec() = *std::move(spec);
  absl::StatusOr<v1::SubmitJobResponse> submitted = client->SubmitJob(request);
  if (!submitted.ok()) {
    client->PrintError(submitted.status());
    if (folder) {
      std::error_code ignored;
      std::filesystem::remove_all(*folder, ignored);
    }
    return 1;
  }
  if (const std::optional<std::chrono::seconds> within = ImmediateOf(options)) {
    if (absl::Status started = StartsWithin(*client, submitted->job_id(), *within); !started.ok()) {
      client->PrintError(started);
      if (folder) {
        std::error_code ignored;
        std::filesystem::remove_all(*folder, ignored);
      }
      return 1;
    }
  }
  return FollowJob(*client, submitted->job_id(), folder,
                   state.label ? RankLabels::kRank : RankLabels::kNone);
}

// The options of `cohort run` and `srun`, on `run`.
void ConfigureRun(CLI::App& run, RunState& state, CommandWords words) {
  state.unsupported = AddJobOptions(run, state.options, words);
  run.get_option("--parsable")->group("");  // run prints the job's output, not its id
  run.get_option("--array")->group("");     // run follows one job; refused with a hint
  run.add_flag("-l,--label", state.label, "start each line of output with its rank: `3: text`");
  run.add_option("--jobid", state.jobid,
                 "run as a step of this running job (default inside a job: $COHORT_JOB_ID)")
      ->type_name("JOB");
  run.add_flag("--exact", state.exact,
               "inside a job: the step holds only the CPUs and GPUs its tasks ask, so that "
               "steps share nodes (--exclusive means the same there)");
  run.add_flag("--overlap", state.overlap,
               "inside a job: the step shares its nodes with every other step, waiting for none");
  // sbatch's --input (a file for the script's stdin) is not run's.
  if (CLI::Option* sbatch_input = run.get_option_no_throw("--input")) {
    std::erase_if(state.unsupported,
                  [&](const UnsupportedOption& u) { return u.option == sbatch_input; });
    run.remove_option(sbatch_input);
  }
  run.add_flag("--pty", state.pty,
               "inside a job: run one task on a pseudo-terminal, its stdin, stdout and stderr "
               "this terminal's (cohort run --pty bash: a shell on a compute node)");
  run.add_option("--input", state.input,
                 "the step's rank that reads this command's stdin (default 0; outside a job "
                 "when stdin is a pipe or a file), none, or a file rank 0 reads instead")
      ->type_name("RANK|none|FILE");
  AddConnectionOptions(run, state.connection, ConfigShortName::kNone);
  TakeCommandVerbatim(run, "COMMAND",
                      "the command and its arguments (after --); everything after it is passed "
                      "on, not read as options");
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<RunState>();
  CLI::App* run = app.add_subcommand(
      "run", "run a command as one job and stream its output until it ends (like srun)");
  ConfigureRun(*run, *state, words);
  run->footer(
      "Usage: cohort run [options] -- COMMAND [ARGS...]\n"
      "\n"
      "Outside a job, submits the command as a job of its own; inside one (a batch script, an\n"
      "allocation of cohort alloc, or with --jobid), starts it as a step of that job, over all of\n"
      "its nodes or those -N, -n, --ntasks-per-node and -w ask, as srun does.\n"
      "\n"
      "Submits the command as a job, shows why it waits while pending, then prints every rank's\n"
      "stdout and stderr as they write it, and exits with the job's status: 0 when it completed,\n"
      "its exit code when it failed, 1 when it was cancelled, timed out or lost a node.\n"
      "Interrupting (Ctrl-C) cancels the job and waits for it to end; a second one stops waiting.\n"
      "\n"
      "The ranks write their output to files in a private folder that this command reads and\n"
      "removes at the end: under $COHORT_RUN_DIR, else $TMPDIR, else /tmp. The nodes must share\n"
      "that filesystem with this command, as emulated nodes on one host do; on a cluster, set\n"
      "COHORT_RUN_DIR to a folder on the shared filesystem. With -o (or -e) the output goes to\n"
      "that file instead and is not printed.");
  run->callback([state, run, &exit_code] { exit_code = Run(*state, run->remaining()); });
}

void AddSrunCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<RunState>();
  ConfigureRun(app, *state, words);
  // Output is forwarded as the ranks write it, line by line, either way.
  app.add_flag("-u,--unbuffered")
      ->description("accepted: each line of output is shown as the ranks write it");
  // A step is a gang: a rank that fails stops the others, as -K.
  app.add_flag("-K{1},--kill-on-bad-exit{1}")
      ->description("accepted: a failing rank always stops the step's others");
  // Slurm's srun takes SLURM_MPI_TYPE when --mpi is not given.
  const auto set_mpi = [state](const std::string& type) {
    if (type == "list") {
      state->mpi = type;
      return;
    }
    const std::optional<std::string_view> canonical = launch::CanonicalMpiType(type);
    if (!canonical) {
      throw CLI::ValidationError(
          "--mpi", fmt::format("{:?} is no MPI type; use one of {}", type, launch::kMpiTypes));
    }
    state->mpi = *canonical;
  };
  app.add_option_function<std::string>(
         "--mpi", set_mpi,
         "pmix, pmi2: a PMIx or PMI server wires the ranks up (docs/mpi.md); "
         "none: they find each other (mpirun, torchrun); list")
      ->type_name("TYPE")
      ->envname("SLURM_MPI_TYPE");
  RefuseFlags(app, "--multi-prog", "run a wrapper that dispatches on $SLURM_PROCID");
  app.footer(
      "Cohort's srun: inside a job (a batch script, salloc, or --jobid) starts a step over its\n"
      "allocation, as `cohort run` does; outside one, runs the command as a job of its own and\n"
      "streams its output. Exits with the step's or job's status. See docs/slurm.md.");
  app.callback([state, &app, &exit_code] { exit_code = Run(*state, app.remaining()); });
}

}  // namespace cohort::cli
