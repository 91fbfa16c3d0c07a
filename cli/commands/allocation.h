// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "cohort/v1/cohort.pb.h"
#include "commands/job_follow.h"
#include "transport/controller_client.h"

/// An allocation held from the submit host for as long as something runs
/// here: what `cohort alloc` (salloc) does around its command, and `srun`
/// outside a job around a step that needs one (--mpi=pmix).
namespace cohort::cli {

/// Submits `spec` as an allocation (nothing of its own runs on the nodes),
/// waits for it as salloc does, saying why it waits (an interrupt cancels
/// it then), calls `run` with the granted job and the watch of its events,
/// and ends the allocation with the status `run` returns. Returns that
/// status, or 1 when the allocation was refused or never started. What it
/// says on stderr is Cohort's (`cohort: granted job allocation 14 on
/// node[01-02]`), or with kSalloc Slurm's salloc's, which tools read
/// (`salloc: Granted job allocation 14`); `quiet` says only errors
/// (salloc -Q). `keep` leaves the allocation to run on after `run` (salloc
/// --no-shell): it ends at its time limit or when cancelled.
enum class AllocationWords : std::uint8_t { kCohort, kSalloc };
struct AllocationStyle {
  AllocationWords words = AllocationWords::kCohort;
  bool quiet = false;
  bool keep = false;
  /// --immediate: the allocation is given up unless granted this soon.
  std::optional<std::chrono::seconds> immediate{};
};
[[nodiscard]] int InAllocation(ControllerClient& client, v1::JobSpec spec,
                               const std::function<int(const v1::Job&, Watch&)>& run,
                               AllocationStyle style = {});

}  // namespace cohort::cli
