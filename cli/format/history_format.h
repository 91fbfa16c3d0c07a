// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"

/// How `cohort history` reads its filters (in sacct's forms) and writes its
/// rows. No clock: `now_ms` is a parameter. Times without a zone are local
/// time (as sacct reads and writes them; the TZ environment variable).
namespace cohort::cli {

/// The filters of `cohort history` as the user typed them (empty: not given).
struct HistoryFilters {
  std::string user;        ///< -u, --user: one login name
  bool all_users = false;  ///< -a, --all-users
  std::string account;     ///< -A, --account
  std::string states;      ///< -s, --state: a comma list
  std::string since;       ///< -S, --since, --starttime
  std::string until;       ///< -E, --until, --endtime
  std::string jobs;        ///< -j, --jobs: ID[,ID...]
  int limit = 0;           ///< --limit; 0: none
};

/// Reads a time as sacct's --starttime and --endtime do, as milliseconds
/// since the epoch: `YYYY-MM-DD` (midnight), `YYYY-MM-DDTHH:MM[:SS]` (local
/// time), `today` or `midnight` (today at 00:00), `now`, or
/// `now-N[UNIT]` / `now+N[UNIT]` with UNIT `seconds` (the default),
/// `minutes`, `hours`, `days` or `weeks` (singular, plural, or s, sec, min,
/// h, hr, d, w), such as `now-2hours`. InvalidArgument naming `option` and
/// the accepted forms when `text` is none of these, or is before 1970.
[[nodiscard]] absl::StatusOr<std::int64_t> ParseHistoryTime(std::string_view text,
                                                            std::string_view option,
                                                            std::int64_t now_ms);

/// Reads a time to come as sbatch's --begin and --deadline do, as
/// milliseconds since the epoch: HH:MM[:SS] (the next such time of day),
/// `midnight`, `noon`, `teatime` (16:00) (the next), `today` and `now` (now),
/// `tomorrow` (its 00:00), `now+N[UNIT]`, and YYYY-MM-DD[THH:MM[:SS]] (local
/// time). InvalidArgument naming `option` and these forms otherwise.
[[nodiscard]] absl::StatusOr<std::int64_t> ParseFutureTime(std::string_view text,
                                                           std::string_view option,
                                                           std::int64_t now_ms);

/// Reads a --state list: finished states by name or sacct's code, any case,
/// comma separated: COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT
/// (TO), NODE_FAIL (NF). Each state once, in the order given.
/// InvalidArgument listing the valid states for an unknown or unfinished
/// state, or an empty list.
[[nodiscard]] absl::StatusOr<std::vector<v1::JobState>> ParseHistoryStates(std::string_view text);

/// Reads a --jobs list `ID[,ID...]` of positive job ids. InvalidArgument
/// for anything else.
[[nodiscard]] absl::StatusOr<std::vector<std::int64_t>> ParseJobIds(std::string_view text);

/// The JobHistory request `filters` ask for, every option checked before
/// any connection is made. InvalidArgument names the option and what it
/// takes.
[[nodiscard]] absl::StatusOr<v1::JobHistoryRequest> MakeHistoryRequest(
    const HistoryFilters& filters, std::int64_t now_ms);

/// The columns of `cohort history`, as sacct names them: JOBID, NAME, USER,
/// ACCOUNT, PARTITION, NODES, NODELIST, SUBMIT, START, END, ELAPSED, STATE,
/// EXITCODE, GPU_HOURS, MAXRSS, TOTALCPU.
[[nodiscard]] std::vector<std::string> HistoryHeader();

/// One finished job's cells under HistoryHeader(): times as local
/// `YYYY-MM-DDTHH:MM:SS` (`none` when it never started), ELAPSED as
/// `[D-]HH:MM:SS`, EXITCODE as `CODE:SIGNAL`, GPU_HOURS with 2 decimals,
/// NODELIST `None assigned` when it never ran.
[[nodiscard]] std::vector<std::string> HistoryRow(const v1::Job& job);
/// One step's cells under HistoryHeader(), as sacct's step lines: JOBID
/// `12.batch` or `12.0`, NAME `batch` or the job's, ACCOUNT, NODES and
/// NODELIST the step's, its times, state and exit; USER, PARTITION and
/// GPU_HOURS are the job's line's alone.
[[nodiscard]] std::vector<std::string> HistoryStepRow(const v1::Job& job, const v1::JobStep& step);

}  // namespace cohort::cli
