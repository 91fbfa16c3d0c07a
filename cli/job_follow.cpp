// SPDX-License-Identifier: Apache-2.0
#include "job_follow.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "job_format.h"

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

}  // namespace cohort::cli
