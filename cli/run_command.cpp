// SPDX-License-Identifier: Apache-2.0
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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
#include "job_format.h"
#include "job_option_table.h"
#include "job_options.h"
#include "rank_output.h"

namespace cohort::cli {
namespace {

struct RunState {
  JobOptions options;
  ConnectionOptions connection;
  std::vector<UnsupportedOption> unsupported;
  bool label = false;
};

// SIGINT and SIGTERM, counted; the wait loop acts on them.
std::atomic<int> interrupts{0};
extern "C" void CountInterrupt(int /*signal*/) { interrupts.fetch_add(1); }

void CatchInterrupts() {
  struct sigaction action {};
  action.sa_handler = CountInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// What the WatchJob thread hands the wait loop.
struct Watch {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<v1::Job> events;
  std::vector<std::string> notes;
  std::optional<absl::Status> ended;    // the stream is over for good
  CallCanceller* call = nullptr;        // the open stream, to cancel it
  bool stop = false;
};

// Streams the job's events into `watch` until it has finished. Reconnects
// while the controller is unavailable (restarting), since the job lives on.
void WatchLoop(ControllerClient& client, std::int64_t job_id, Watch& watch) {
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::chrono::milliseconds backoff{250};
  bool reported_outage = false;
  while (true) {
    CallCanceller canceller;
    {
      const std::lock_guard lock(watch.mutex);
      if (watch.stop) return;
      watch.call = &canceller;
    }
    bool finished = false;
    const absl::Status status = client.WatchJob(
        request,
        [&](const v1::JobEvent& event) {
          const std::lock_guard lock(watch.mutex);
          finished = IsFinished(event.job().state());
          watch.events.push_back(event.job());
          reported_outage = false;
          backoff = std::chrono::milliseconds(250);
          watch.changed.notify_all();
        },
        canceller);
    std::unique_lock lock(watch.mutex);
    watch.call = nullptr;
    if (finished || watch.stop) {
      watch.ended = absl::OkStatus();
      watch.changed.notify_all();
      return;
    }
    if (!status.ok() && !absl::IsUnavailable(status)) {
      watch.ended = status;
      watch.changed.notify_all();
      return;
    }
    if (!reported_outage) {
      watch.notes.push_back(fmt::format(
          "cohort: lost the controller at {} ({}); still waiting for job {}", client.Address(),
          status.ok() ? "the stream ended" : status.message(), job_id));
      reported_outage = true;
      watch.changed.notify_all();
    }
    watch.changed.wait_for(lock, backoff, [&] { return watch.stop; });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
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

// A private folder for the ranks' output files, on a filesystem the nodes
// must share: $COHORT_RUN_DIR, else $TMPDIR, else /tmp.
absl::StatusOr<std::filesystem::path> MakeOutputFolder(const std::string& job_name) {
  std::string base = "/tmp";
  for (const char* name : {"COHORT_RUN_DIR", "TMPDIR"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      base = value;
      break;
    }
  }
  std::string safe;
  for (const char c : job_name.substr(0, 40)) {
    safe += std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.'
                ? c
                : '_';
  }
  std::string path =
      (std::filesystem::path(base) / fmt::format("cohort-run-{}-XXXXXX", safe)).string();
  if (::mkdtemp(path.data()) == nullptr) {
    return absl::UnavailableError(fmt::format(
        "cannot make a folder for the job's output under {}: {}; set COHORT_RUN_DIR to a "
        "writable folder that the nodes share",
        base, std::strerror(errno)));
  }
  return std::filesystem::path(path);
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
    std::deque<v1::Job> events;
    std::vector<std::string> notes;
    {
      std::unique_lock lock(watch.mutex);
      watch.changed.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return !watch.events.empty() || !watch.notes.empty() || watch.ended.has_value();
      });
      events.swap(watch.events);
      notes.swap(watch.notes);
      // The end is taken once every event before it has been shown.
      if (events.empty()) ended = watch.ended;
    }
    for (const std::string& note : notes) std::cerr << note << '\n';
    for (const v1::Job& job : events) {
      progress.Show(job);
      last = job;
    }
    if (output) output->Poll();

    const int seen = interrupts.load();
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
      {
        const std::lock_guard lock(watch.mutex);
        watch.stop = true;
        if (watch.call != nullptr) watch.call->Cancel();
        watch.changed.notify_all();
      }
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

  // Unless -o or -e say otherwise, the ranks write into per-rank files in a
  // private folder, and FollowJob prints them.
  std::optional<std::filesystem::path> folder;
  const bool own_output = !options.output.has_value();
  const bool own_error = !options.output.has_value() && !options.error.has_value();
  if (own_output || own_error) {
    absl::StatusOr<std::filesystem::path> made = MakeOutputFolder(spec->name());
    if (!made.ok()) {
      std::cerr << fmt::format("cohort: {}\n", made.status());
      return 1;
    }
    folder = *made;
    if (own_output) spec->set_output((*folder / "%j-%t.out").string());
    if (own_error) spec->set_error((*folder / "%j-%t.err").string());
  }

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
  AddConnectionOptions(*run, state->connection, ConfigShortName::kNone);
  TakeCommandVerbatim(*run, "COMMAND",
                      "the command and its arguments (after --); everything after it is passed "
                      "on, not read as options");
  run->footer(
      "Usage: cohort run [options] -- COMMAND [ARGS...]\n"
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
