// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/engine/job.h"

/// `cohort why` as facts: what keeps a job from starting and what would
/// start it sooner, decided by the engine (Engine::Explain) and put in
/// words by the CLI (cli/format/why_view.h). A reason is an enum, a blocker a
/// number or a name, a counterfactual the change that was tried and found
/// to place the job now; the only text is what the engine already records
/// as a job's reason detail (the allocator's shortfall, a preemptor's
/// victims), never a sentence of `cohort why` or a command name.
namespace cohort {

/// A job of the same partition that the queue tries before this one.
struct JobAhead {
  std::string display_id;
  std::int64_t priority = 0;
  int nodes = 0;
};

/// A leaf switch and how many of its nodes could take one node of the gang
/// now (free enough, in the job's partition).
struct LeafFit {
  std::string name;
  int fitting = 0;
  int nodes = 0;
};

/// Why a job that waits for resources or priority waits.
struct WaitFacts {
  std::string partition;        ///< the one it waits in
  int nodes = 0;                ///< of its gang
  int ahead_count = 0;          ///< eligible jobs ahead of it in its partition
  std::vector<JobAhead> ahead;  ///< the first three of them, in queue order
  /// The allocator's reason when the gang does not fit the cluster as it is
  /// now; empty when it fits (and it waits for priority).
  std::string shortfall;
  std::vector<LeafFit> closest_leaves;  ///< with a switch tree: the three that come closest
  std::string preempting;               ///< its victims are being stopped: the detail; empty: none
  /// The backfill plan has no start for it because it lies past
  /// BackfillDepth or the jobs in its way have no time limit.
  bool beyond_backfill_depth = false;
  bool has_time_limit = false;
};

/// Changes to the request, each tried on the cluster as it is now, that
/// would start the job at once.
struct Counterfactuals {
  int fewer_nodes = 0;                  ///< the most nodes it could start with now; 0: none
  int without_switches = 0;             ///< dropping --switches=N would start it: N; 0: no
  std::vector<std::string> partitions;  ///< other partitions that could start it now
};

/// What keeps one job from starting, at `explained_at`. The job itself
/// (its state, reason detail, nodes) is the caller's to look up by `job`.
struct Explanation {
  JobId job = 0;  ///< for an array: its pending task, if any
  JobStatus status;
  PendingReason reason = PendingReason::kNone;  ///< pending jobs only
  Millis expected_start{0};                     ///< 0: unknown
  Millis explained_at{0};
  WaitFacts wait;  ///< not held, nor waiting for a dependency or a limit
  Counterfactuals sooner;
};

}  // namespace cohort
