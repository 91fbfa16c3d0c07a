// SPDX-License-Identifier: Apache-2.0
// `cohort alloc`: an interactive allocation, as salloc. It waits for the
// allocation, runs a shell or a command here (on the submit host) with the
// allocation's environment, so that `cohort run` inside it starts steps on
// the allocation, and ends the allocation when the command ends.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/allocation.h"
#include "commands/commands.h"
#include "commands/job_follow.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "spec/job_option_table.h"
#include "spec/job_options.h"
#include "transport/controller_client.h"

extern char** environ;

namespace cohort::cli {
namespace {

struct AllocState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
  AllocationWords words = AllocationWords::kCohort;  ///< salloc: Slurm's
  bool no_shell = false;  ///< salloc --no-shell: leave the allocation running, run nothing
};

// What the command run in the allocation sees, as salloc sets it: the
// caller's environment and the allocation's facts.
std::vector<std::string> AllocationEnvironment(const v1::Job& job) {
  const int nodes = job.spec().nodes() > 0 ? job.spec().nodes() : 1;
  const int tasks = job.spec().tasks_per_node() > 0 ? job.spec().tasks_per_node() : 1;
  const std::string id = std::to_string(job.id());
  const std::pair<const char*, std::string> vars[] = {
      {"COHORT_JOB_ID", id},
      {"COHORT_NODELIST", job.nodes()},
      {"COHORT_NNODES", std::to_string(nodes)},
      {"SLURM_JOB_ID", id},
      {"SLURM_JOBID", id},
      {"SLURM_JOB_NAME", job.spec().name()},
      {"SLURM_JOB_NODELIST", job.nodes()},
      {"SLURM_NODELIST", job.nodes()},
      {"SLURM_JOB_NUM_NODES", std::to_string(nodes)},
      {"SLURM_NNODES", std::to_string(nodes)},
      {"SLURM_NTASKS", std::to_string(nodes * tasks)},
      {"SLURM_NPROCS", std::to_string(nodes * tasks)},
      {"SLURM_NTASKS_PER_NODE", std::to_string(tasks)},
      {"SLURM_TASKS_PER_NODE",
       nodes > 1 ? fmt::format("{}(x{})", tasks, nodes) : std::to_string(tasks)},
      {"SLURM_CPUS_PER_TASK",
       std::to_string(job.spec().cpus_per_task() > 0 ? job.spec().cpus_per_task() : 1)},
      {"SLURM_JOB_PARTITION", job.spec().partition()},
      {"SLURM_JOB_ACCOUNT", job.spec().account()},
      {"SLURM_SUBMIT_DIR", job.spec().submit_dir()},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [var, value] : vars) replaced = replaced || name == var;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [var, value] : vars) env.push_back(fmt::format("{}={}", var, value));
  return env;
}

// Waits for the job to leave PENDING, saying why it waits; nullopt (after
// saying why) when it ended or an interrupt cancelled it first.
std::optional<v1::Job> WaitForGrant(ControllerClient& client, std::int64_t id, Watch& watch) {
  std::string said;
  bool cancelled = false;
  while (true) {
    WatchNews news = TakeNews(watch, std::chrono::milliseconds(200));
    const std::optional<absl::Status>& ended = news.ended;
    for (const v1::Job& job : news.events) {
      if (job.state() == v1::JOB_RUNNING) return job;
      if (IsFinished(job.state()) || job.state() == v1::JOB_COMPLETING) {
        std::cerr << fmt::format("cohort: job allocation {} has been revoked ({}{})\n", id,
                                 JobStateName(job.state()),
                                 job.reason().empty() ? "" : ": " + job.reason());
        return std::nullopt;
      }
      std::string text = fmt::format("cohort: job {} queued and waiting for resources ({}{})", id,
                                     job.reason().empty() ? "waiting" : job.reason(),
                                     job.reason_detail().empty() ? "" : ": " + job.reason_detail());
      if (text != said) std::cerr << text << '\n';
      said = std::move(text);
    }
    if (ended) {
      if (!ended->ok()) client.PrintError(*ended);
      return std::nullopt;
    }
    if (Interrupts() > 0 && !cancelled) {
      std::cerr << fmt::format("cohort: cancelling job {}, which has not started\n", id);
      v1::CancelJobRequest cancel;
      cancel.add_job_ids(id);
      if (absl::StatusOr<v1::CancelJobResponse> r = client.CancelJob(cancel); !r.ok()) {
        client.PrintError(r.status());
        return std::nullopt;
      }
      cancelled = true;
    }
  }
}

// Runs the command with the allocation's environment and waits for it; the
// job ending first (cancelled, out of time) hangs it up, as salloc does.
int RunInAllocation(const std::vector<std::string>& command, const v1::Job& job, Watch& watch) {
  std::vector<std::string> env = AllocationEnvironment(job);
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << fmt::format("cohort: cannot start {}: {}\n", command.front(),
                             std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // The command handles the terminal's signals itself.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execvpe(argv.front(), argv.data(), envp.data());
    std::cerr << fmt::format("cohort: cannot run {}: {}\n", command.front(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  bool revoked = false;
  while (true) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return 1;
    std::unique_lock lock(watch.mutex);
    watch.changed.wait_for(lock, std::chrono::milliseconds(100));
    for (const v1::Job& event : watch.events) {
      if (!revoked && (IsFinished(event.state()) || event.state() == v1::JOB_COMPLETING)) {
        std::cerr << fmt::format("cohort: job allocation {} has been revoked ({}{})\n", job.id(),
                                 JobStateName(event.state()),
                                 event.reason().empty() ? "" : ": " + event.reason());
        ::kill(child, SIGHUP);
        ::kill(child, SIGTERM);
        revoked = true;
      }
    }
    watch.events.clear();
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int Alloc(const AllocState& state, const std::vector<std::string>& remaining) {
  absl::StatusOr<Command> command = SplitCommand(remaining, "alloc");
  if (!command.ok()) {
    std::cerr << fmt::format("cohort: {}\n", command.status());
    return 2;
  }
  if (absl::Status refused = CheckNotImplemented(state.unsupported); !refused.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refused.message());
    return 2;
  }
  std::vector<std::string> words = command->words;
  if (words.empty()) {
    const char* shell = std::getenv("SHELL");
    words.emplace_back(shell != nullptr && *shell != '\0' ? shell : "/bin/sh");
  }
  JobOptions options = state.options;
  // salloc's SALLOC_* variables: below the command line.
  if (state.words == AllocationWords::kSalloc) {
    if (absl::Status read = ApplyInputVariables("SALLOC_", options); !read.ok()) {
      std::cerr << fmt::format("salloc: error: {}\n", read.message());
      return 2;
    }
  }
  if (options.array) {
    std::cerr << "cohort: alloc: --array makes many jobs, and alloc holds one allocation\n";
    return 2;
  }
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(
      options, options.job_name ? *options.job_name
                                : std::filesystem::path(words.front()).filename().string());
  if (!spec.ok()) {
    std::cerr << fmt::format("cohort: {}\n", spec.status());
    return 2;
  }
  spec->set_allocation_only(true);
  for (const std::string& word : words) spec->add_argv(word);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  request.set_test_only(options.test_only);

  absl::StatusOr<ControllerClient> client = ControllerClient::Connect(state.connection);
  if (!client.ok()) {
    std::cerr << fmt::format("cohort: {}\n", client.status());
    return 2;
  }
  if (options.test_only) {
    absl::StatusOr<v1::SubmitJobResponse> answer = client->SubmitJob(request);
    if (!answer.ok()) {
      client->PrintError(answer.status());
      return 1;
    }
    PrintTestOnlyAnswer(*answer, std::cout);
    return 0;
  }
  // sbatch's -Q (which the job options take and drop) quiets salloc.
  const bool quiet = state.words == AllocationWords::kSalloc &&
                     std::any_of(state.unsupported.begin(), state.unsupported.end(),
                                 [](const UnsupportedOption& u) {
                                   return u.name == "--quiet" && u.option->count() > 0;
                                 });
  if (state.no_shell) {
    return InAllocation(
        *client, request.spec(), [](const v1::Job&, Watch&) { return 0; },
        {.words = state.words, .quiet = quiet, .keep = true, .immediate = ImmediateOf(options)});
  }
  return InAllocation(
      *client, request.spec(),
      [&](const v1::Job& granted, Watch& watch) { return RunInAllocation(words, granted, watch); },
      {.words = state.words, .quiet = quiet, .keep = false, .immediate = ImmediateOf(options)});
}

// The options of `cohort alloc` and `salloc`, on `alloc`.
void ConfigureAlloc(CLI::App& alloc, AllocState& state, CommandWords words) {
  state.unsupported = AddJobOptions(alloc, state.options, words);
  alloc.get_option("--parsable")->group("");
  alloc.get_option("--array")->group("");
  AddConnectionOptions(alloc, state.connection, ConfigShortName::kNone);
  TakeCommandVerbatim(alloc, "COMMAND",
                      "the command and its arguments (after --); default: $SHELL");
}

}  // namespace

int InAllocation(ControllerClient& client, v1::JobSpec spec,
                 const std::function<int(const v1::Job&, Watch&)>& run, AllocationStyle style) {
  const bool slurm = style.words == AllocationWords::kSalloc;
  const auto say = [&style](const std::string& text) {
    if (!style.quiet) std::cerr << text;
  };
  spec.set_allocation_only(true);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = std::move(spec);
  // From here on an interrupt cancels the waiting allocation; once granted,
  // what runs handles its own.
  CatchInterrupts();
  absl::StatusOr<v1::SubmitJobResponse> submitted = client.SubmitJob(request);
  if (!submitted.ok()) {
    client.PrintError(submitted.status());
    return 1;
  }
  const std::int64_t id = submitted->job_id();
  say(slurm ? fmt::format("salloc: Pending job allocation {}\n", id)
            : fmt::format("cohort: pending job allocation {}\n", id));
  if (style.immediate) {
    if (absl::Status started = StartsWithin(client, id, *style.immediate); !started.ok()) {
      client.PrintError(started);
      return 1;
    }
  }
  Watch watch;
  std::thread watcher([&] { WatchLoop(client, id, watch); });
  const std::optional<v1::Job> granted = WaitForGrant(client, id, watch);
  int exit_status = 1;
  if (granted) {
    say(slurm ? fmt::format("salloc: Granted job allocation {}\nsalloc: Nodes {} are "
                            "ready for job\n",
                            id, granted->nodes())
              : fmt::format("cohort: granted job allocation {} on {}\n", id, granted->nodes()));
    exit_status = run(*granted, watch);
  }
  if (granted && !style.keep) {
    say(slurm ? fmt::format("salloc: Relinquishing job allocation {}\n", id)
              : fmt::format("cohort: relinquishing job allocation {}\n", id));
    v1::ControlJobsRequest end;
    end.add_job_refs(std::to_string(id));
    end.set_action(v1::JOB_COMPLETE);
    end.set_exit_code(exit_status);
    if (absl::StatusOr<v1::ControlJobsResponse> r = client.ControlJobs(end);
        !r.ok() && !absl::IsFailedPrecondition(r.status())) {
      client.PrintError(r.status());
    }
  }
  StopWatch(watch);
  watcher.join();
  return exit_status;
}

void AddAllocCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<AllocState>();
  CLI::App* alloc = app.add_subcommand(
      "alloc", "wait for an allocation, then run a shell or a command in it here (like salloc)");
  ConfigureAlloc(*alloc, *state, words);
  alloc->footer(
      "Usage: cohort alloc [options] [-- COMMAND [ARGS...]]\n"
      "\n"
      "Asks for an allocation with the job options of cohort submit and waits for it (Ctrl-C\n"
      "cancels it while it waits). Once it is granted, runs COMMAND (default: your $SHELL) here,\n"
      "with the allocation's environment (COHORT_JOB_ID, SLURM_JOB_ID, SLURM_JOB_NODELIST,\n"
      "SLURM_NNODES, SLURM_NTASKS, ...), so that `cohort run` inside it starts steps on the\n"
      "allocation's nodes. Nothing runs on the nodes but those steps. When COMMAND exits, the\n"
      "allocation ends (COMPLETED, or FAILED with a non-zero status) and alloc exits with\n"
      "COMMAND's status. If the allocation ends first (cancelled, out of time), COMMAND gets\n"
      "SIGHUP and SIGTERM. An allocation whose alloc is killed outright lasts until its time\n"
      "limit or cohort cancel.");
  alloc->callback([state, alloc, &exit_code] { exit_code = Alloc(*state, alloc->remaining()); });
}

void AddSallocCommand(CLI::App& app, int& exit_code, CommandWords words) {
  auto state = std::make_shared<AllocState>();
  state->words = AllocationWords::kSalloc;
  ConfigureAlloc(app, *state, words);
  app.add_flag("--no-shell", state->no_shell,
               "once granted, exit and leave the allocation running (until its time limit or "
               "scancel); run steps in it with srun --jobid=ID");
  app.footer(
      "Cohort's salloc: waits for an allocation, runs $SHELL or the command here in it, and\n"
      "ends the allocation with its status, as `cohort alloc` does. See docs/slurm.md.");
  app.callback([state, &app, &exit_code] { exit_code = Alloc(*state, app.remaining()); });
}

}  // namespace cohort::cli
