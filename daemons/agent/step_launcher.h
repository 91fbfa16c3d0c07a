// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job_cgroup.h"
#include "launch_file.h"

/// The agent's spool and the cohort-stepd it starts for each launch.
namespace cohort::agent {

/// Lays out the spool and starts cohort-stepd:
///
///   SPOOL/agent.lock                  held (flock) while an agent uses the
///   spool SPOOL/agent.sock                  the agent's datagram socket (the
///   Agent binds it) SPOOL/<node>/job-<id>.<attempt>/  one folder per launch,
///   mode 0700:
///       launch.json  what to run (step::LaunchFile), written by the agent
///       script       the batch script, when the job has one
///       events       what happened (step_events.h), appended by the stepd
///       reported     how far the agent has turned events into messages
///       stepd.log    the stepd's own stdout and stderr
///
/// Runs on the agent's loop thread; no call blocks longer than a few small
/// file writes and one posix_spawn.
class StepLauncher {
 public:
  /// `stepd_path`: the cohort-stepd to run (StepdNextToAgent()).
  /// `host_topology_xml`: hwloc's XML of this machine (AgentSettings),
  /// which PrepareSpool writes to the spool for the PMIx servers of `srun
  /// --mpi=pmix` steps; empty: none, and they discover the machine.
  StepLauncher(std::string spool_dir, std::string stepd_path, std::string host_topology_xml = {});
  StepLauncher(const StepLauncher&) = delete;
  StepLauncher& operator=(const StepLauncher&) = delete;
  ~StepLauncher();

  /// Creates the spool folder (mode 0700) or checks the existing one is a
  /// folder this user owns and others cannot write, locks it against a
  /// second agent, and checks the stepd can be run. FailedPrecondition, or
  /// the errno's status, with the path and what to do. Then logs, once, whom
  /// the ranks run as (the job's owner when the agent is root, else the
  /// agent's user) and sets up the launches' cgroups (step/job_cgroup.h):
  /// where /sys/fs/cgroup is cgroup v2, the agent's own cgroup hands the
  /// memory controller (and cpuset, when it can) down, moving the agent into
  /// a leaf of its own when the "no internal processes" rule asks for it;
  /// where it holds cgroup v1 hierarchies, those of cpuset, memory and
  /// devices get a tree each under the agent's cgroup in them. Otherwise it
  /// logs why not, once, and launches run without.
  [[nodiscard]] absl::Status PrepareSpool();

  /// Creates the node's folder, and its cgroup folders when cgroups are in
  /// use (a failure there, or one the agent cannot write, turns cgroups off,
  /// logged); the agent removes them when it ends, where empty. InvalidArgument for a
  /// name that is no file name; the errno's status otherwise.
  [[nodiscard]] absl::Status PrepareNode(const std::string& node);

  [[nodiscard]] std::string SocketPath() const { return spool_dir_ + "/agent.sock"; }
  /// The node's folder of the spool (PrepareNode makes it).
  [[nodiscard]] std::string NodeFolder(const std::string& node) const {
    return spool_dir_ + "/" + node;
  }
  [[nodiscard]] std::string LaunchFolder(const std::string& node, step::LaunchId id) const;

  /// The launch folders of a node, whatever state they are in.
  [[nodiscard]] std::vector<std::pair<step::LaunchId, std::string>> ListLaunches(
      const std::string& node) const;

  /// Creates a launch's folder, mode 0700. AlreadyExists when it does.
  [[nodiscard]] absl::Status CreateLaunchFolder(const std::string& folder) const;

  /// Writes the batch script (mode 0700). The errno's status, naming the node.
  [[nodiscard]] static absl::Status WriteScript(const std::string& path, std::string_view text,
                                                const std::string& node);

  /// Creates the launch's cgroups (when cgroups are in use) held to
  /// `limits` (step::ApplyLimits), writes `folder`/launch.json naming them, and
  /// starts `cohort-stepd folder` in its own session, with stdin from /dev/null, stdout and stderr
  /// to stepd.log, default signal dispositions, an empty mask and no other descriptors. Returns its
  /// pid: a child of the agent until the agent exits. The errno's status, naming the node, when the
  /// file or the process cannot be made.
  [[nodiscard]] absl::StatusOr<pid_t> Start(const std::string& folder, const step::LaunchFile& file,
                                            const step::LaunchLimits& limits) const;

  /// Removes a launch's folder and everything in it; errors are logged.
  static void RemoveLaunch(const std::string& folder);

  /// SIGKILLs everything in a launch's cgroup (step::KillCgroup), including
  /// what left the ranks' process group. Nothing without cgroups.
  void KillLaunchCgroup(const std::string& node, step::LaunchId id) const;

  /// Kills what is left in a launch's cgroup and removes it, without
  /// waiting; for launches whose stepd (which removes it) is gone. Errors are
  /// logged.
  void RemoveLaunchCgroup(const std::string& node, step::LaunchId id) const;

  /// 2 or 1: the cgroup version in use; 0 when launches get no cgroups.
  [[nodiscard]] int CgroupVersion() const {
    if (cgroup_trees_.empty()) return 0;
    return cgroup_trees_.front().controller.empty() ? 2 : 1;
  }
  /// Whether launches' cgroups keep them off devices (LaunchLimits'
  /// denied_devices): a cgroup v1 devices hierarchy is in use, or cgroup v2
  /// and the agent may load eBPF device filters.
  [[nodiscard]] bool LimitsDevices() const { return devices_.starts_with("limited"); }

 private:
  /// Sets cgroup_trees_, or says why cgroups cannot be used.
  [[nodiscard]] absl::Status PrepareCgroups();
  /// PrepareCgroups on cgroup v2, with the text of /proc/self/cgroup.
  [[nodiscard]] absl::Status PrepareUnified(const std::string& mount, const std::string& own_text);
  /// Turns cgroups off, logging why.
  void DisableCgroups(const absl::Status& why);
  /// A launch's folder in each tree.
  [[nodiscard]] std::vector<std::string> LaunchCgroups(const std::string& node,
                                                       step::LaunchId id) const;

  std::string spool_dir_;
  std::string host_topology_xml_;
  std::string topology_file_;  ///< where PrepareSpool wrote it; empty: not written
  std::string stepd_path_;
  int lock_fd_ = -1;
  std::vector<step::CgroupTree> cgroup_trees_;
  std::vector<std::string> nodes_;  ///< whose cgroup folders PrepareNode made
  /// What a node's v2 folder hands down to launches: "+memory", and
  /// " +cpuset" when the agent's cgroup has it.
  std::string unified_controllers_;
  /// How launches are kept off devices, for the log: "limited (…)", or
  /// "unlimited (why)".
  std::string devices_;
};

/// How SpawnAlone opens the child's output file.
enum class OpenMode { kAppend, kTruncate };

/// Starts `program` with `args`, with stdin from /dev/null, stdout and stderr to `output` (created
/// mode 0600), default signal dispositions, an empty mask, no other descriptors, and the agent's
/// environment plus `extra_env` (NAME=value; a later one wins). Returns its pid: a child of the
/// agent, to be watched by the reaper. The errno's status, naming the program.
[[nodiscard]] absl::StatusOr<pid_t> SpawnAlone(const std::string& program,
                                               const std::vector<std::string>& args,
                                               const std::vector<std::string>& extra_env,
                                               const std::string& output, OpenMode mode);

/// `cohort-stepd` in the folder of the running executable (/proc/self/exe).
[[nodiscard]] std::string StepdNextToAgent();

}  // namespace cohort::agent
