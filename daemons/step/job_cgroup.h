// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

/// The cgroups of launches. The agent creates them (one per launch, with
/// the job's memory limit, its cores as the cpuset and its other GPUs'
/// devices denied), the stepd moves each rank into its launch's folders
/// before exec and removes them once the ranks are reaped. The layout under
/// the agent's own cgroup BASE of each tree (cgroup v2: one tree; cgroup v1:
/// one per hierarchy of cpuset, memory and devices):
///
///   BASE/cohort-agent                     the agent itself (cgroup v2 lets
///                                         only leaves hold processes once
///                                         BASE hands controllers down)
///   BASE/cohort-<spool>/                  the agent's launches (AgentCgroupName)
///     <node>/cohort-job-<id>.<attempt>[.<step>] one launch (a job's own, or
///                                          one step's, on one node)
///
/// The pure functions compute names and values; the rest do file I/O and
/// are safe from any single thread.
namespace cohort::step {

/// Where cgroup v2 is mounted, or the cgroup v1 hierarchies (a folder each).
inline constexpr std::string_view kCgroupMount = "/sys/fs/cgroup";
/// The cgroup v1 hierarchies launches get a folder in, where mounted.
inline constexpr std::string_view kV1Controllers[] = {"cpuset", "memory", "devices"};
/// The leaf the agent moves itself into.
inline constexpr std::string_view kAgentCgroupLeaf = "cohort-agent";

/// This process's cgroup v2 path (relative to the mount, starting with '/')
/// from the text of /proc/self/cgroup: the path of its `0::` line; nullopt
/// when there is none (a cgroup v1 only system). Pure.
[[nodiscard]] std::optional<std::string> UnifiedCgroupPath(std::string_view proc_self_cgroup);

/// This process's cgroup v1 path in the hierarchy of `controller` (relative
/// to that hierarchy's mount, starting with '/') from the text of
/// /proc/self/cgroup: the path of the line whose controller list names it;
/// nullopt when none does. Pure.
[[nodiscard]] std::optional<std::string> V1CgroupPath(std::string_view proc_self_cgroup,
                                                      std::string_view controller);

/// The folder of one agent's launches under BASE: `cohort-` and 8 hex
/// digits of a hash of its spool folder (absolute), which one agent at a
/// time holds. Agents sharing a host (emulating ones, tests) then never
/// share a launch's cgroup, and an agent restarted on its spool finds its
/// launches' again. Pure.
[[nodiscard]] std::string AgentCgroupName(std::string_view spool_dir);

/// One tree the launches' cgroups are made in.
struct CgroupTree {
  std::string base;        ///< BASE/cohort-<spool>: the folder node folders go under
  std::string controller;  ///< cgroup v1: cpuset, memory or devices; v2: empty
};

/// What a launch's cgroups hold it to.
struct LaunchLimits {
  std::int64_t memory_mb = 0;  ///< 0: no limit
  std::vector<int> cpus;       ///< PU OS indices; empty: the parent's
  /// Character devices the launch may not open (st_rdev): its node's GPUs
  /// it was not granted.
  std::vector<dev_t> denied_devices;
};

/// The `c MAJOR:MINOR rwm` rule of a character device (st_rdev). Pure.
[[nodiscard]] std::string DeviceRule(dev_t device);

/// The folder the agent's cgroups go under, for an agent whose own cgroup is
/// `own` (a path under `mount`): `own` itself, or its parent when `own` is
/// the kAgentCgroupLeaf an earlier run of the agent moved it into. Pure.
[[nodiscard]] std::string CgroupBase(std::string_view mount, std::string_view own);

/// `base`/`node`/cohort-job-<id>.<attempt> for a job's own launch (`step`
/// negative), `…/cohort-job-<id>.<attempt>.<step>` for a step's: each launch
/// has its own, so that a step's end never kills its job's batch script.
/// Pure.
[[nodiscard]] std::string LaunchCgroupFolder(std::string_view base, std::string_view node,
                                             std::int64_t job_id, int attempt, int step);

/// memory.max's value for a job's memory per node: bytes, or "max" for 0
/// (no limit) and for sizes beyond what bytes can count. Pure.
[[nodiscard]] std::string MemoryMaxValue(std::int64_t memory_mb);

/// Creates `folder` in `tree` (an existing one is reused). A cgroup v1
/// cpuset folder gets its parent's cpuset.cpus and cpuset.mems, without
/// which it could hold no process. The errno's status, naming the file.
[[nodiscard]] absl::Status CreateCgroup(const CgroupTree& tree, const std::string& folder);

/// Writes what `tree`'s controllers limit to the launch folder `folder`:
/// memory.max (v2) or memory.limit_in_bytes (v1 memory); cpuset.cpus
/// (v2 when the cpuset controller is on, v1 cpuset) when `limits.cpus` is
/// set; each denied device as a devices.deny rule (v1 devices) or in an
/// eBPF device filter (v2: device_filter.h). The errno's status, naming the
/// file.
[[nodiscard]] absl::Status ApplyLimits(const CgroupTree& tree, const std::string& folder,
                                       const LaunchLimits& limits);

/// The whole text of a small file (a cgroup file, /proc/self/cgroup);
/// nullopt when it cannot be opened.
[[nodiscard]] std::optional<std::string> ReadSmallFile(const std::string& path);

/// Writes `text` to the cgroup file `path` in one write. The errno's status,
/// naming the file.
[[nodiscard]] absl::Status WriteCgroupFile(const std::string& path, std::string_view text);

/// SIGKILLs every process in the cgroup `folder` and its descendants:
/// cgroup.kill where the kernel has it (v2, 5.14), else each pid of
/// cgroup.procs (a launch's v1 folders have no descendants). Best effort: a folder that is gone has
/// nothing to kill.
void KillCgroup(const std::string& folder);

/// Kills what is left in `folder` (KillCgroup), waits up to `wait` for the
/// processes to leave, and removes it. OK also when the folder is gone; the
/// errno's status (EBUSY while a process lingers) otherwise.
[[nodiscard]] absl::Status RemoveCgroup(const std::string& folder,
                                        std::chrono::milliseconds wait);

}  // namespace cohort::step
