// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launch_file.h"
#include "step_events.h"

/// Following one launch through the files of its spool folder.
namespace cohort::agent {

/// Whether a launch's cohort-stepd still runs, as far as /proc tells.
enum class StepdState {
  kUnknown,  ///< it has not written its `stepd` line (yet)
  kAlive,
  kGone,  ///< exited, or its pid now belongs to another process
};

/// One launch as the agent follows it: reads what its stepd appended to the
/// event file since the last read, folds it into a step::LaunchRecord, and
/// hands out the reports the controller has not been given. How far reports
/// were handed out is kept in the folder (`reported`), so an agent started
/// again resends nothing an earlier one already queued; what an earlier one
/// queued but never got out reaches the controller through Register's
/// running and finished lists. Loop thread only; small file reads and writes.
class LaunchTracker {
 public:
  LaunchTracker(std::string folder, step::LaunchId id);

  /// Continues where an earlier agent stopped handing out reports.
  void LoadReportedMark();

  /// The reports of the lines appended since the last call, in order; lines
  /// before the reported mark only update the record. Advances and saves
  /// the mark. Read errors and malformed lines are logged and skipped.
  [[nodiscard]] std::vector<step::LaunchReport> ReadEvents();

  /// Checks the stepd named by the event file: its pid must still be the
  /// process that started at the recorded time, and not a zombie.
  [[nodiscard]] StepdState CheckStepd() const;

  /// For a launch whose stepd is gone before `done` (or never came):
  /// SIGKILLs the ranks' process group if any rank is listed alive, and
  /// appends what LaunchRecord::AbandonEvents says, and returns the reports
  /// of everything read since the last ReadEvents. When the file cannot be
  /// written the events are applied in memory only (logged).
  [[nodiscard]] std::vector<step::LaunchReport> Abandon(std::string_view reason);

  /// When the event file last changed (when the launch ended, once done).
  [[nodiscard]] std::chrono::system_clock::time_point LastChange() const;

  [[nodiscard]] const step::LaunchRecord& Record() const { return record_; }
  [[nodiscard]] const std::string& Folder() const { return folder_; }
  [[nodiscard]] step::LaunchId Id() const { return id_; }

 private:
  void SaveReportedMark() const;

  std::string folder_;
  step::LaunchId id_;
  step::LaunchRecord record_;
  std::uint64_t offset_ = 0;    // bytes of the event file read and applied
  std::uint64_t reported_ = 0;  // bytes whose reports were handed out
};

}  // namespace cohort::agent
