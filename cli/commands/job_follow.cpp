// SPDX-License-Identifier: Apache-2.0
#include "commands/job_follow.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "format/job_format.h"

namespace cohort::cli {

namespace {

// SIGINT and SIGTERM, counted; the wait loops act on them.
std::atomic<int> interrupts{0};
extern "C" void CountInterrupt(int /*signal*/) { interrupts.fetch_add(1); }

}  // namespace

int Interrupts() { return interrupts.load(); }

void CatchInterrupts() {
  struct sigaction action {};
  action.sa_handler = CountInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

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

WatchNews TakeNews(Watch& watch, std::chrono::milliseconds wait) {
  WatchNews news;
  std::vector<std::string> notes;
  {
    std::unique_lock lock(watch.mutex);
    watch.changed.wait_for(lock, wait, [&] {
      return !watch.events.empty() || !watch.notes.empty() || watch.ended.has_value();
    });
    news.events.swap(watch.events);
    notes.swap(watch.notes);
    if (news.events.empty()) news.ended = watch.ended;
  }
  for (const std::string& note : notes) std::cerr << note << '\n';
  return news;
}

absl::StatusOr<std::optional<std::filesystem::path>> TakeOutput(const JobOptions& options,
                                                                v1::JobSpec& spec) {
  const bool own_output = !options.output.has_value();
  const bool own_error = !options.output.has_value() && !options.error.has_value();
  if (!own_output && !own_error) return std::nullopt;
  absl::StatusOr<std::filesystem::path> folder = MakeOutputFolder(spec.name());
  if (!folder.ok()) return folder.status();
  if (own_output) spec.set_output((*folder / "%j-%t.out").string());
  if (own_error) spec.set_error((*folder / "%j-%t.err").string());
  return std::optional(*folder);
}

void StopWatch(Watch& watch) {
  const std::lock_guard lock(watch.mutex);
  watch.stop = true;
  if (watch.call != nullptr) watch.call->Cancel();
  watch.changed.notify_all();
}

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

namespace {

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
    case v1::JOB_COMPLETED:
      return 0;
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

}  // namespace

std::optional<std::chrono::seconds> ImmediateOf(const JobOptions& options) {
  if (options.immediate.empty()) return std::nullopt;
  return std::chrono::seconds(std::stoi(options.immediate));  // digits, checked when parsed
}

absl::Status StartsWithin(ControllerClient& client, std::int64_t job_id,
                          std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job last;
  while (true) {
    absl::StatusOr<v1::GetJobResponse> got = client.GetJob(request);
    if (!got.ok()) return got.status();
    last = got->job();
    if (last.state() != v1::JOB_PENDING) return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(job_id);
  if (absl::StatusOr<v1::CancelJobResponse> r = client.CancelJob(cancel); !r.ok()) {
    return r.status();
  }
  return absl::UnavailableError(fmt::format(
      "Unable to allocate resources: job {} did not start within {} s (--immediate) and is "
      "cancelled; it waited for {}{}",
      job_id, within.count(), last.reason().empty() ? "a pass" : last.reason(),
      last.reason_detail().empty() ? "" : ": " + last.reason_detail()));
}

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

}  // namespace cohort::cli
