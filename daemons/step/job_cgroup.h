// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

/// The cgroup v2 folders of launches. The agent creates them (one per launch,
/// with the job's memory.max), the stepd moves each rank into its launch's
/// folder before exec and removes the folder once the ranks are reaped. The
/// layout under the agent's own cgroup BASE:
///
///   BASE/cohort-agent                     the agent itself (cgroup v2 lets
///                                         only leaves hold processes once
///                                         BASE hands controllers down)
///   BASE/<node>/cohort-job-<id>.<attempt>[.<step>] one launch (a job's own,
///                                          or one step's, on one node)
///
/// The pure functions compute names; the rest do file I/O and are safe from
/// any single thread.
namespace cohort::step {

/// Where cgroup v2 is mounted.
inline constexpr std::string_view kCgroupMount = "/sys/fs/cgroup";
/// The leaf the agent moves itself into.
inline constexpr std::string_view kAgentCgroupLeaf = "cohort-agent";

/// This process's cgroup v2 path (relative to the mount, starting with '/')
/// from the text of /proc/self/cgroup: the path of its `0::` line; nullopt
/// when there is none (a cgroup v1 only system). Pure.
[[nodiscard]] std::optional<std::string> UnifiedCgroupPath(std::string_view proc_self_cgroup);

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

/// Writes `text` to the cgroup file `path` in one write. The errno's status,
/// naming the file.
[[nodiscard]] absl::Status WriteCgroupFile(const std::string& path, std::string_view text);

/// SIGKILLs every process in the cgroup `folder` and its descendants:
/// cgroup.kill where the kernel has it (5.14), else each pid of
/// cgroup.procs. Best effort: a folder that is gone has nothing to kill.
void KillCgroup(const std::string& folder);

/// Kills what is left in `folder` (KillCgroup), waits up to `wait` for the
/// processes to leave, and removes it. OK also when the folder is gone; the
/// errno's status (EBUSY while a process lingers) otherwise.
[[nodiscard]] absl::Status RemoveCgroup(const std::string& folder,
                                        std::chrono::milliseconds wait);

}  // namespace cohort::step
