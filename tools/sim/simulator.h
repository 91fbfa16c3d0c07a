// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "trace.h"

/// cohort-sim: the real Engine replayed in virtual time over a trace.
namespace cohort::sim {

struct SimOptions {
  /// How often Tick runs (time limits, --switches waits). A job that hits
  /// its limit ends at the first tick past it.
  std::chrono::seconds tick{60};
  /// Calls Engine::CheckInvariants after every instant at which something
  /// happened; the first broken one ends the run with Internal.
  bool check_invariants = false;
  /// Virtual time after which the run stops even with jobs left (0: none).
  std::chrono::seconds horizon{0};
};

/// What became of one trace job.
struct JobOutcome {
  std::size_t trace_index = 0;
  JobId id = 0;  ///< 0: refused at submit (`reason` says why)
  JobState state = JobState::kPending;
  std::string reason;
  std::chrono::seconds submit{0};  ///< virtual times from the trace's start
  std::chrono::seconds start{-1};  ///< first start; -1: never started
  std::chrono::seconds end{-1};    ///< -1: not finished when the run stopped
  int nodes = 0;
  int gpus = 0;  ///< over the whole gang
  int attempts = 0;
  int leaves = 0;          ///< leaf switches spanned by the first placement
  int level = 0;           ///< level of the lowest switch above the gang
  int optimal_leaves = 0;  ///< fewest leaves that can hold a job of its size here
  int optimal_level = 0;   ///< lowest level whose switch can hold it
  int segment = 0;         ///< --segment=S of the trace; 0: none
  /// Of its first placement's segments (S consecutive node ranks), those
  /// whose nodes lie in more than one block (or leaf, for nodes in none);
  /// -1: not started or no segment.
  int split_segments = -1;
  /// The same count had first fit placed it instead: the first N nodes in
  /// the node table that could take one node of the gang, on the pool just
  /// after its start with its own nodes given back; -1: not comparable.
  int first_fit_split_segments = -1;
};

/// A run's figures. Times are virtual except `wall_seconds`.
struct SimReport {
  std::size_t jobs = 0;
  std::size_t finished = 0;
  std::size_t refused = 0;
  std::size_t unfinished = 0;
  std::map<std::string, std::size_t> states;  ///< finished jobs by final state
  std::map<std::string, std::size_t> qos;     ///< jobs by trace QOS (not applied yet)
  double makespan_hours = 0;                  ///< first submission to last end
  double gpu_hours_used = 0;
  double gpu_hours_available = 0;  ///< every GPU of the cluster over the makespan
  double utilisation = 0;          ///< used / available
  double wait_p50_s = 0, wait_p90_s = 0, wait_p99_s = 0, wait_mean_s = 0;
  double bounded_slowdown_mean = 0;  ///< bound 10 s
  std::size_t preempted_jobs = 0;    ///< jobs that ran more than one attempt
  std::size_t requeues = 0;          ///< attempts beyond the first, over all jobs
  std::size_t multi_node_jobs = 0;
  double leaves_mean = 0;  ///< per multi-node job
  int leaves_max = 0;
  double levels_mean = 0;
  std::map<int, std::size_t> leaves_histogram;  ///< multi-node jobs by leaves spanned
  std::map<int, std::size_t> level_histogram;
  double optimal_share = 0;  ///< multi-node jobs placed on the fewest leaves possible
  /// Jobs with --segment that started, and the share of them none of whose
  /// segments split a block: as placed, and as first fit would have on the
  /// same free nodes (over those where first fit had enough nodes).
  std::size_t segment_jobs = 0;
  double segment_whole_share = 0;
  std::size_t first_fit_compared = 0;
  double first_fit_whole_share = 0;
  std::size_t scheduling_passes = 0;
  std::size_t invariant_checks = 0;
  double wall_seconds = 0;
  int nodes = 0;
  int gpus = 0;
  std::vector<JobOutcome> outcomes;  ///< one per trace job, in trace order
};

/// Replays `trace` on a fresh Engine over the cluster: every node registers
/// at time 0 with the resources its NodeName line gives, jobs are submitted
/// at their times, a scheduling pass follows every instant at which
/// something happened, ranks exit 0 at start + runtime when that is within
/// the job's time limit (else Tick ends the job at its limit), and a
/// Terminate (cancel, limit) ends the node's ranks by SIGTERM at once. Runs
/// until every job has finished, nothing can start any more, or the
/// horizon. Nodes heartbeat at every tick. Returns Internal when an
/// invariant check fails. Single-threaded; reads no clock but for
/// `wall_seconds`.
[[nodiscard]] absl::StatusOr<SimReport> Simulate(const config::ClusterConfig& config,
                                                 const topology::Topology& topology,
                                                 const alloc::NodePool& pool,
                                                 const std::vector<TraceJob>& trace,
                                                 const SimOptions& options);

/// The JobRequest a trace job submits (one rank per node). uid is the
/// user's number in order of first appearance, from 1000.
[[nodiscard]] JobRequest ToRequest(const TraceJob& job, std::uint32_t uid, std::size_t index);

/// The report as a readable table.
[[nodiscard]] std::string FormatReport(const SimReport& report);
/// The report as JSON (stable field names; per-job outcomes with `jobs`).
[[nodiscard]] std::string ReportJson(const SimReport& report, bool with_jobs);

}  // namespace cohort::sim
