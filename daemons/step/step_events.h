// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

/// The event file of one launch: what cohort-stepd appends to it, one line
/// per event, and what the agent makes of it. Pure: no I/O; safe from any
/// thread.
///
/// The file is the truth about a launch's ranks. cohort-stepd writes
///   stepd PID START       its own pid and /proc start time (first line)
///   started RANK PID      a rank runs (one line per rank, in rank order)
///   pgid N                every rank runs, in process group N
///   exit RANK CODE SIGNAL [MAXRSS_KB CPU_MS]
///                         a rank was reaped (SIGNAL 0: it exited with CODE),
///                         with what it used (older stepds wrote no usage)
///   failed REASON         not every rank could start; the started ones are
///                         killed, and their exits follow
///   image OUTCOME BYTES MS
///                         the step's container image: pulled (BYTES on
///                         disk, unpacked), cached (found in the node's
///                         cache) or failed, after MS milliseconds
///   done                  every rank started was reaped; the stepd exits
/// The agent appends `failed`, `exit` and `done` itself, and only, when a
/// launch has no stepd (it never started, or it died before `done`).
namespace cohort::step {

struct StepdEvent {
  pid_t pid = 0;
  std::int64_t start_time = 0;  ///< field 22 of /proc/PID/stat, in clock ticks since boot
};
struct RankStartedEvent {
  int rank = 0;
  pid_t pid = 0;
};
struct GroupEvent {
  pid_t pgid = 0;
};
struct RankExitEvent {
  int rank = 0;
  int exit_code = 0;  ///< meaningful when signal is 0
  int signal = 0;     ///< the signal that killed the rank; 0 when it exited
  /// What the rank used, from wait4: its peak resident memory and its user
  /// plus system CPU time, its waited-for children's included.
  std::int64_t max_rss_kb = 0;
  std::int64_t cpu_ms = 0;
};
struct FailedEvent {
  std::string reason;  ///< one line; starts with the node's name
};
struct DoneEvent {};
/// How a step's container image was had (docs/containers.md).
enum class ImageOutcome { kPulled, kCached, kFailed };
struct ImageEvent {
  ImageOutcome outcome = ImageOutcome::kCached;
  std::int64_t bytes = 0;  ///< a pulled image's disk space, unpacked
  std::int64_t ms = 0;     ///< how long getting it took
  friend bool operator==(const ImageEvent&, const ImageEvent&) = default;
};
/// "pulled", "cached", "failed".
[[nodiscard]] std::string_view ImageOutcomeName(ImageOutcome outcome);

using StepEvent = std::variant<StepdEvent, RankStartedEvent, GroupEvent, RankExitEvent, FailedEvent,
                               DoneEvent, ImageEvent>;

/// The event as one line of the file, with its '\n'. Newlines in a reason
/// become spaces.
[[nodiscard]] std::string FormatStepEvent(const StepEvent& event);

/// Parses one line (without its '\n'). InvalidArgument for an unknown word,
/// a missing or malformed number, or trailing text.
[[nodiscard]] absl::StatusOr<StepEvent> ParseStepEvent(std::string_view line);

/// The complete lines at the start of `text` (without their '\n') and how
/// many bytes they span; a last line without '\n' is still being written
/// and is left for the next read.
struct CompleteLines {
  std::vector<std::string_view> lines;
  std::size_t consumed = 0;
};
[[nodiscard]] CompleteLines SplitCompleteLines(std::string_view text);

/// A reaped rank's event from its wait status and resource usage (wait4).
[[nodiscard]] RankExitEvent ExitOf(int rank, int wait_status, const struct rusage& usage);

/// What a launch's events mean for the controller, in the order they happen.
struct RanksStartedReport {
  std::map<int, pid_t> ranks;  ///< global rank → pid
  pid_t pgid = 0;
};
struct RankExitedReport {
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  std::int64_t max_rss_kb = 0;
  std::int64_t cpu_ms = 0;
};
struct LaunchFailedReport {
  std::string reason;
};
struct ReleasedReport {};
/// For the agent's metrics only: the controller is told nothing.
struct ImageReport {
  ImageEvent image;
};
using LaunchReport = std::variant<RanksStartedReport, RankExitedReport, LaunchFailedReport,
                                  ReleasedReport, ImageReport>;

/// One launch's state, folded from its events in file order. The controller
/// hears of ranks only once all of them run (`pgid`): RanksStarted, then one
/// RankExited per rank; a launch that fails before that is one LaunchFailed
/// (its killed ranks are not reported). `done` is always JobReleased. Lines
/// that make no sense where they stand (a second exit of a rank, anything
/// after `done`) change nothing.
class LaunchRecord {
 public:
  /// Applies one event; returns what the controller must be told, if anything.
  std::optional<LaunchReport> Apply(const StepEvent& event);

  /// The events to append for a launch whose stepd is gone before `done`
  /// (or never came): `failed REASON` unless the ranks were reported
  /// started, an exit by SIGKILL for every rank still listed alive (the
  /// caller kills their process group), then `done`.
  [[nodiscard]] std::vector<StepEvent> AbandonEvents(std::string_view reason) const;

  [[nodiscard]] pid_t StepdPid() const { return stepd_.pid; }
  [[nodiscard]] std::int64_t StepdStartTime() const { return stepd_.start_time; }
  [[nodiscard]] bool HasStepd() const { return stepd_.pid > 0; }
  /// The ranks' process group: from `pgid`, else the first rank's pid (the
  /// stepd makes it the group's leader); 0 while no rank runs.
  [[nodiscard]] pid_t ProcessGroup() const;
  /// Every rank started and was reported (`pgid` came before any `failed`).
  [[nodiscard]] bool Running() const { return running_; }
  [[nodiscard]] bool Done() const { return done_; }
  /// Ranks started and not yet reaped, rank → pid; empty once done.
  [[nodiscard]] std::map<int, pid_t> LiveRanks() const;
  [[nodiscard]] int RanksStarted() const { return static_cast<int>(started_.size()); }
  [[nodiscard]] int RanksOk() const { return ranks_ok_; }
  /// The first rank of a running launch that exited non-zero or by a signal.
  [[nodiscard]] const std::optional<RankExitEvent>& FirstFailure() const { return first_failure_; }
  /// The largest peak resident memory of its ranks that exited, and their
  /// CPU time together.
  [[nodiscard]] std::int64_t MaxRssKb() const { return max_rss_kb_; }
  [[nodiscard]] std::int64_t CpuMs() const { return cpu_ms_; }
  /// Why the launch failed to start; empty when it did not fail.
  [[nodiscard]] const std::string& LaunchError() const { return launch_error_; }

 private:
  StepdEvent stepd_;
  std::map<int, pid_t> started_;
  std::map<int, RankExitEvent> exits_;
  pid_t pgid_ = 0;
  bool running_ = false;
  bool failed_ = false;
  bool done_ = false;
  int ranks_ok_ = 0;
  std::optional<RankExitEvent> first_failure_;
  std::int64_t max_rss_kb_ = 0;
  std::int64_t cpu_ms_ = 0;
  std::string launch_error_;
};

}  // namespace cohort::step
