// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "cohort/alloc/topology.h"
#include "cohort/engine/job.h"
#include "cohort/v1/cohort.pb.h"

/// What running launches use now, as the agents sample them every
/// JobAcctGatherFrequency (UsageReport): the last sample of each launch on
/// each node, for sstat (GetJobUsage), a running job's `usage` (the
/// dashboard) and the job-labelled metrics. Memory only: a restarted
/// controller knows again after one sample period. State thread only.
namespace cohort::controller {

/// The step key of a job's own launch (its batch script, or the command
/// run as every rank).
inline constexpr int kOwnLaunch = -1;

/// A GPU counts as idle below this utilization (percent).
inline constexpr int kIdleGpuPercent = 5;

/// What one report may hold: more is refused whole, so that a node's report
/// cannot grow the controller's memory past what its launches could be.
inline constexpr int kMostReportLaunches = 4096;
inline constexpr int kMostLaunchTasks = 4096;
inline constexpr int kMostReportGpus = 64;

/// InvalidArgument naming the first field past its bound, or a figure out
/// of range (negative, a percentage past 100); OK otherwise. Pure.
[[nodiscard]] absl::Status CheckUsageReport(const v1::UsageReport& report);

class UsageBook {
 public:
  /// One launch of a report, as the agent hub checked it: the engine runs
  /// `job` on the node at the report's attempt.
  struct Accepted {
    const v1::LaunchUsage* launch;
  };

  /// Replaces what `node` said before with `launches` of its checked report
  /// (launches it no longer lists ended there), sampled at `at`; then
  /// updates the idle-GPU mark of every job the node ran or runs.
  void Record(topology::NodeId node, const std::string& node_name, Millis at,
              const std::vector<Accepted>& launches, const v1::UsageReport& report);
  /// Forgets a job: it ended, or was requeued.
  void Forget(JobId job);
  /// Forgets a node's samples: it is down, or its agent registered again.
  void ForgetNode(topology::NodeId node);

  /// Each launch of `job` sampled, its own first (step kOwnLaunch, named
  /// `own_name`), then its steps by id ("0", "1", …).
  [[nodiscard]] std::vector<v1::LiveUsage> Launches(JobId job, const std::string& own_name) const;
  /// The whole job: every launch on every node, its GPUs counted once per
  /// node however many of its launches hold them; nullopt before a sample.
  [[nodiscard]] std::optional<v1::LiveUsage> Whole(JobId job) const;
  /// Jobs with a sample, by id.
  [[nodiscard]] std::vector<JobId> Jobs() const;

 private:
  struct NodeSample {
    std::string node;
    Millis at{0};
    std::uint64_t gpus = 0;  ///< mask the launch holds there
    std::vector<v1::TaskSample> tasks;
  };
  /// A node's GPU samples, by index: utilization and memory (MB); -1: none.
  struct NodeGpus {
    std::vector<int> util;
    std::vector<std::int64_t> mem_mb;
  };
  struct JobSamples {
    std::map<int, std::map<topology::NodeId, NodeSample>> launches;  ///< by step (kOwnLaunch first)
    Millis gpu_idle_since{0};                                        ///< 0: not idle, or unmeasured
  };

  /// Adds the samples of one launch (or every launch of the job) to `out`.
  void Sum(const std::map<topology::NodeId, NodeSample>& nodes, v1::LiveUsage& out) const;
  /// Sets the job's idle mark from its latest samples.
  void MarkIdle(JobSamples& job, Millis at) const;
  /// Removes `node`'s samples of the launches `listed` (what it listed
  /// last), and empties the list.
  void Unlist(topology::NodeId node, std::vector<std::pair<JobId, int>>& listed);

  std::unordered_map<JobId, JobSamples> jobs_;
  std::unordered_map<topology::NodeId, NodeGpus> gpus_;
  /// What each node listed last, to drop what it no longer lists.
  std::unordered_map<topology::NodeId, std::vector<std::pair<JobId, int>>> listed_;
};

}  // namespace cohort::controller
