// SPDX-License-Identifier: Apache-2.0
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cerrno>
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
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands.h"
#include "controller_client.h"
#include "job_follow.h"
#include "job_format.h"
#include "job_option_table.h"
#include "job_options.h"
#include "rank_output.h"
#include "run_step.h"

namespace cohort::cli {
namespace {

struct RunState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
  bool label = false;
  std::string jobid;     ///< --jobid: run as a step of this job
  bool exact = false;    ///< --exact: a step holds only what its tasks ask
  bool overlap = false;  ///< --overlap: a step shares with every other step
  std::string input = "0";  ///< --input: the step's rank that reads stdin, or none
  bool pty = false;         ///< --pty: one task of the step on a terminal
};

// The job whose allocation `cohort run` runs in: --jobid, else the job it
// runs inside (COHORT_JOB_ID, which every batch script and rank has); none
// outside a job.
std::string AllocationOf(const RunState& state) {
  if (!state.jobid.empty()) return state.jobid;
  const char* inside = std::getenv("COHORT_JOB_ID");
  return inside != nullptr ? std::string(inside) : std::string();
}

// Prints each change of the job that the user should see.
class Progress {
 public:
  void Show(const v1::Job& job) {
    const v1::JobState state = job.state();
    if (state == v1::JOB_PENDING) {
      if (last_ == v1::JOB_RUNNING || last_ == v1::JOB_COMPLETING) {
        std::cerr << fmt::format("cohort: job {} requeued (attempt {}){}\n", job.id(),
                                 job.attempt(), Why(job));
        pending_text_.clear();
      }
      std::string text = fmt::format("cohort: job {} pending: {}", job.id(),
                                     job.reason().empty() ? "waiting" : job.reason());
      if (!job.reason_detail().empty()) text += fmt::format(" ({})", job.reason_detail());
      if (job.queue_position() > 0) {
        text += fmt::format(", position {} in the queue", job.queue_position());
      }
      if (text != pending_text_) std::cerr << text << '\n';
      pending_text_ = std::move(text);
    } else if (state == v1::JOB_RUNNING && last_ != v1::JOB_RUNNING) {
      std::cerr << fmt::format("cohort: job {} running on {}\n", job.id(), job.nodes());
      ran_ = true;
    }
    last_ = state;
  }
  [[nodiscard]] bool Ran() const { return ran_; }

  static std::string Why(const v1::Job& job) {
    if (job.reason().empty() && job.reason_detail().empty()) return "";
    if (job.reason_detail().empty()) return ": " + job.reason();
    if (job.reason().empty()) return ": " + job.reason_detail();
    return fmt::format(": {} ({})", job.reason(), job.reason_detail());
  }

 private:
  v1::JobState last_ = v1::JOB_STATE_UNSPECIFIED;
  std::string pending_text_;
  bool ran_ = false;
};

// The exit status of `cohort run` for a finished job, after saying why it
// did not complete.
int Outcome(const v1::Job& job) {
  const std::string why = Progress::Why(job);
  switch (job.state()) {
    case v1::JOB_COMPLETED: return 0;
    case v1::JOB_FAILED:
      if (job.exit_signal() != 0) {
        std::cerr << fmt::format("cohort: job {} failed: a rank was killed by signal {} ({}){}\n",
                                 job.id(), job.exit_signal(), SignalName(job.exit_signal()), why);
      } else if (job.exit_code() != 0) {
        std::cerr << fmt::format("cohort: job {} failed with exit code {}{}\n", job.id(),
                                 job.exit_code(), why);
      } else {  // it never ran, such as a launch that failed
        std::cerr << fmt::format("cohort: job {} failed{}\n", job.id(), why);
      }
      return job.exit_code() > 0 && job.exit_code() < 256 ? job.exit_code() : 1;
    case v1::JOB_CANCELLED:
      std::cerr << fmt::format("cohort: job {} cancelled{}\n", job.id(), why);
      return 1;
    case v1::JOB_TIMEOUT:
      std::cerr << fmt::format("cohort: job {} reached its time limit of {}{}\n", job.id(),
                               FormatLimit(job.time_limit_s()), why);
      return 1;
    case v1::JOB_NODE_FAIL:
      std::cerr << fmt::format("cohort: job {} stopped: a node failed{}\n", job.id(), why);
      return 1;
    default:
      std::cerr << fmt::format("cohort: job {} ended in state {}{}\n", job.id(),
                               JobStateName(job.state()), why);
      return 1;
  }
}

// Waits for a submitted job to end while printing its progress and its
// ranks' output from `folder` (when set); returns the exit status of
// `cohort run`. Interrupts cancel the job, a second one stops the wait.
int FollowJob(ControllerClient& client, std::int64_t job_id,
              const std::optional<std::filesystem::path>& folder, RankLabels labels) {
  Watch watch;
  std::thread watcher([&] { WatchLoop(client, job_id, watch); });
  std::optional<RankOutput> output;
  if (folder) output.emplace(*folder, job_id, labels);
  const std::string where =
      folder ? fmt::format(" (its output files are in {})", folder->string()) : "";
  Progress progress;
  std::optional<v1::Job> last;
  std::optional<absl::Status> ended;
  int handled_interrupts = 0;
  while (!ended) {
    WatchNews news = TakeNews(watch, std::chrono::milliseconds(200));
    ended = std::move(news.ended);
    for (const v1::Job& job : news.events) {
      progress.Show(job);
      last = job;
    }
    if (output) output->Poll();

    const int seen = Interrupts();
    if (seen > 0 && handled_interrupts == 0) {
      std::cerr << fmt::format(
          "cohort: cancelling job {}; waiting for it to end (interrupt again to stop waiting)\n",
          job_id);
      v1::CancelJobRequest cancel;
      cancel.add_job_ids(job_id);
      if (absl::StatusOr<v1::CancelJobResponse> r = client.CancelJob(cancel); !r.ok()) {
        client.PrintError(r.status());
      }
    }
    if (seen > 1) {
      std::cerr << fmt::format(
          "cohort: not waiting for job {} any more; see cohort show job {}{}\n", job_id, job_id,
          where);
      StopWatch(watch);
      watcher.join();
      if (output) output->Flush();
      return 130;
    }
    handled_interrupts = seen;
  }
  watcher.join();
  if (output) output->Flush();

  if (!ended->ok() || !last || !IsFinished(last->state())) {
    if (!ended->ok()) client.PrintError(*ended);
    std::cerr << fmt::format("cohort: lost track of job {}; see cohort show job {}{}\n", job_id,
                             job_id, where);
    return 1;
  }
  if (output && progress.Ran() && !output->SawFiles() &&
      (last->state() == v1::JOB_COMPLETED || last->state() == v1::JOB_FAILED)) {
    std::cerr << fmt::format(
        "cohort: warning: no output of job {} appeared in {}; if its nodes do not share this "
        "filesystem, set COHORT_RUN_DIR to a folder they share\n",
        job_id, folder->string());
  }
  if (folder) {
    std::error_code ignored;
    std::filesystem::remove_all(*folder, ignored);
  }
  return Outcome(*last);
}

int Run(const RunState& state, const std::vector<std::string>& remaining) {
  absl::StatusOr<Command> command = SplitCommand(remaining, "run");
  if (!command.ok()) {
    std::cerr << fmt::format("cohort: {}\n", command.status());
    return 2;
  }
  if (command->words.empty()) {
    std::cerr << "cohort: run needs a command: cohort run [options] -- COMMAND [ARGS...]\n";
    return 2;
  }
  for (const std::string& name : GivenUnsupported(state.unsupported)) {
    std::cerr << fmt::format("cohort: warning: {} is not supported yet; ignored\n", name);
  }
  const JobOptions& options = state.options;
  if (const std::string allocation = AllocationOf(state); !allocation.empty()) {
    absl::StatusOr<ControllerClient> client = ControllerClient::Connect(state.connection);
    if (!client.ok()) {
      std::cerr << fmt::format("cohort: {}\n", client.status());
      return 2;
    }
    int stdin_rank = -1;
    if (state.input != "none") {
      const auto [end, ec] = std::from_chars(state.input.data(),
                                             state.input.data() + state.input.size(), stdin_rank);
      if (ec != std::errc() || end != state.input.data() + state.input.size() || stdin_rank < 0) {
        std::cerr << fmt::format(
            "cohort: --input: {:?} is neither a rank (0, 1, ...) nor none\n", state.input);
        return 2;
      }
    }
    // Inside an allocation Slurm's --exclusive means --exact, as of 21.08.
    const StepRun step{.job = allocation,
                       .sharing = state.overlap                       ? v1::STEP_OVERLAP
                                  : state.exact || options.exclusive ? v1::STEP_EXACT
                                                                     : v1::STEP_WHOLE_NODES,
                       .labels = state.label ? RankLabels::kRank : RankLabels::kNone,
                       .stdin_rank = stdin_rank,
                       .terminal = state.pty ? StepTerminal::kPty : StepTerminal::kNone};
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
  return FollowJob(*client, submitted->job_id(), folder,
                   state.label ? RankLabels::kRank : RankLabels::kNone);
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<RunState>();
  CLI::App* run = app.add_subcommand(
      "run", "run a command as one job and stream its output until it ends (like srun)");
  state->unsupported = AddJobOptions(*run, state->options, words);
  run->get_option("--parsable")->group("");  // run prints the job's output, not its id
  run->get_option("--array")->group("");     // run follows one job; refused with a hint
  run->add_flag("-l,--label", state->label, "start each line of output with its rank: `3: text`");
  run->add_option("--jobid", state->jobid,
                  "run as a step of this running job (default inside a job: $COHORT_JOB_ID)")
      ->type_name("JOB");
  run->add_flag("--exact", state->exact,
                "inside a job: the step holds only the CPUs and GPUs its tasks ask, so that "
                "steps share nodes (--exclusive means the same there)");
  run->add_flag("--overlap", state->overlap,
                "inside a job: the step shares its nodes with every other step, waiting for none");
  // sbatch's --input (a file for the script's stdin) is not run's.
  if (CLI::Option* sbatch_input = run->get_option_no_throw("--input")) {
    std::erase_if(state->unsupported,
                  [&](const UnsupportedOption& u) { return u.option == sbatch_input; });
    run->remove_option(sbatch_input);
  }
  run->add_flag("--pty", state->pty,
                "inside a job: run one task on a pseudo-terminal, its stdin, stdout and stderr "
                "this terminal's (cohort run --pty bash: a shell on a compute node)");
  run->add_option("--input", state->input,
                  "inside a job: the step's rank that reads this command's stdin (default 0), "
                  "or none")
      ->type_name("RANK|none");
  AddConnectionOptions(*run, state->connection, ConfigShortName::kNone);
  TakeCommandVerbatim(*run, "COMMAND",
                      "the command and its arguments (after --); everything after it is passed "
                      "on, not read as options");
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

}  // namespace cohort::cli
