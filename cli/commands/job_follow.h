// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"
#include "format/rank_output.h"
#include "spec/job_options.h"
#include "transport/controller_client.h"

/// What `cohort run` needs to follow a job or a step until it ends: the
/// interrupts it counts, the WatchJob stream on a thread of its own, and a
/// private folder for the ranks' output files.
namespace cohort::cli {

/// From now on SIGINT and SIGTERM are counted (Interrupts()) instead of
/// ending the process; the wait loops act on them.
void CatchInterrupts();
/// SIGINT and SIGTERM received since CatchInterrupts.
[[nodiscard]] int Interrupts();

/// What the WatchJob thread hands the wait loop. Guarded by `mutex`.
struct Watch {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<v1::Job> events;
  std::vector<std::string> notes;
  std::optional<absl::Status> ended;  ///< the stream is over for good
  CallCanceller* call = nullptr;      ///< the open stream, to cancel it
  bool stop = false;
};

/// Streams the job's events into `watch` until it has finished, or
/// `watch.stop` is set. Reconnects while the controller is unavailable
/// (restarting), since the job lives on, noting the outage once.
void WatchLoop(ControllerClient& client, std::int64_t job_id, Watch& watch);
/// What the WatchJob thread handed over since the last call.
struct WatchNews {
  std::deque<v1::Job> events;
  /// The stream's end, taken only once every event before it has been.
  std::optional<absl::Status> ended;
};
/// Waits up to `wait` for news from the WatchJob thread, prints its notes
/// (outages) to stderr, and takes its events.
[[nodiscard]] WatchNews TakeNews(Watch& watch, std::chrono::milliseconds wait);

/// Sets `watch.stop`, cancels its stream and wakes it; the caller joins the
/// thread running WatchLoop.
void StopWatch(Watch& watch);

/// A private folder (mode 0700) for the ranks' output files, on a
/// filesystem the nodes must share: under $COHORT_RUN_DIR, else $TMPDIR,
/// else /tmp. Unavailable with what to do when it cannot be made.
[[nodiscard]] absl::StatusOr<std::filesystem::path> MakeOutputFolder(const std::string& job_name);

/// Unless -o or -e say otherwise, `cohort run` has the ranks write per-rank
/// files (`%j-%t.out`, `%j-%t.err`) into a private folder (MakeOutputFolder)
/// and prints them: points `spec`'s output and error there and returns the
/// folder, or none when -o names the output. The folder's error otherwise.
[[nodiscard]] absl::StatusOr<std::optional<std::filesystem::path>> TakeOutput(
    const JobOptions& options, v1::JobSpec& spec);

/// --immediate[=SECONDS]: OK once the job has started (or ended) within
/// `within` of now; else cancels it and returns Unavailable saying so, with
/// why it waited. The options' value: none when --immediate was not given.
[[nodiscard]] absl::Status StartsWithin(ControllerClient& client, std::int64_t job_id,
                                        std::chrono::seconds within);
[[nodiscard]] std::optional<std::chrono::seconds> ImmediateOf(const JobOptions& options);

/// Waits for a submitted job to end while printing its progress to stderr
/// and its ranks' output from `folder` (when set); returns the exit status
/// of `cohort run` (0 completed, the exit code of a failed job, else 1).
/// Interrupts (after CatchInterrupts) cancel the job; a second one stops
/// the wait (130).
[[nodiscard]] int FollowJob(ControllerClient& client, std::int64_t job_id,
                            const std::optional<std::filesystem::path>& folder, RankLabels labels);

}  // namespace cohort::cli
