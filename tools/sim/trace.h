// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// Job traces for cohort-sim: the CSV format operators replay (see
/// docs/simulator.md).
namespace cohort::sim {

/// One job of a trace, as submitted. Each field maps onto a JobRequest
/// field of the same meaning (ToRequest in simulator.h); a new column is a
/// new field here and one line there.
struct TraceJob {
  std::chrono::seconds submit_time{0};  ///< from the start of the trace
  std::string user;
  std::string account;
  std::string partition;  ///< empty: the cluster's default partition
  int nodes = 1;
  int gpus_per_node = 0;
  std::chrono::seconds runtime{0};     ///< how long the job would run without a limit
  std::chrono::seconds time_limit{0};  ///< 0: the partition's default; kUnlimited: none
  /// Parsed and reported; not applied until JobRequest carries a QOS.
  std::string qos;
  int segment = 0;  ///< --segment=S: the gang in pieces of S nodes, each in one block; 0: none
};

/// The columns every trace has, in the order FormatTrace writes them.
inline constexpr std::string_view kTraceHeader =
    "submit_time,user,account,partition,nodes,gpus_per_node,runtime,time_limit,qos";

/// Parses a trace: a header line naming the columns (any order; the nine
/// of kTraceHeader and `segment`, qos, partition and segment optional,
/// unknown ones refused so that
/// a misspelt column is not ignored), then one job a line. Blank lines and
/// lines starting with '#' are skipped. Times are seconds; time_limit also
/// takes Slurm's forms (`90`, `1:30:00`, `2-00:00:00`, `UNLIMITED`; a plain
/// number is seconds, not Slurm's minutes). Jobs need not be sorted.
/// InvalidArgument names `file:line`, the column and the fix.
[[nodiscard]] absl::StatusOr<std::vector<TraceJob>> ParseTrace(std::string_view text,
                                                               std::string_view file);

/// Writes jobs in the format ParseTrace reads, header first; a `segment`
/// column only when a job has one.
[[nodiscard]] std::string FormatTrace(const std::vector<TraceJob>& jobs);

}  // namespace cohort::sim
