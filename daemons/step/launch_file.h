// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/launch/binding.h"
#include "cohort/launch/launch_env.h"
#include "image_pull.h"

/// The launch file: everything cohort-stepd needs to start one job's ranks on
/// one node, written by the agent as `launch.json` into the launch's spool
/// folder. Pure: no I/O; safe from any thread.
namespace cohort::step {

/// The most ranks one node starts for one job; a launch asking for more is
/// refused rather than allowed to stall the node.
inline constexpr int kMaxRanksPerNode = 1024;

/// How the ranks' output files are opened (sbatch's --open-mode).
enum class OpenMode { kAppend, kTruncate };

/// Whose identity the ranks run with.
enum class RunAs {
  kStepd,  ///< the stepd's own (an agent that is not root runs every job as itself)
  kOwner,  ///< the job's owner: uid, groups and HOME/USER/LOGNAME/SHELL of its passwd entry
};

/// Where a step's ranks' stdout and stderr go and stdin comes from: the
/// `cohort run` that started the step listens at `address` (io_frame.h).
/// Empty address: the ranks' output goes to their files, stdin is /dev/null.
struct StepIo {
  std::string address;  ///< HOST:PORT
  std::string key;      ///< proves the stepd to `cohort run`
  int stdin_rank = -1;  ///< the step's rank that reads stdin; -1: none
  bool pty = false;     ///< that rank runs on a pseudo-terminal the stepd holds
  /// The ranks' output goes to their files (-o/-e with --mpi=pmix or
  /// pmi2): the stream starts the step's MPI wire-up and carries what the
  /// stepd says, not the ranks' output.
  bool files = false;
};

/// A step's MPI wire-up through a PMIx server in its cohort-stepd
/// (`srun --mpi=pmix`): the step's shape, as the server tells the ranks.
struct MpiSetup {
  std::string type;                ///< "pmix"; empty: none
  std::vector<std::string> nodes;  ///< the step's nodes, in its order
  std::vector<int> tasks;          ///< its tasks on each of them
  int node_index = 0;              ///< this node among them
  /// hwloc's XML of this machine, which the PMIx server reads rather than
  /// discovering it (the agent's spool); empty: it discovers.
  std::string topology_file{};
};

/// A step's container (pyxis's --container-* options, docs/containers.md)
/// and where the node keeps what it needs. Enabled() when it names an
/// image or a container.
struct ContainerSetup {
  std::string image;    ///< as the user wrote it (image_ref.h); empty: the named container's
  std::string mounts;   ///< --container-mounts (container_options.h's ParseMounts)
  std::string workdir;  ///< --container-workdir; empty: the job's if there, else the image's
  std::string name;     ///< --container-name NAME[:MODE]; empty: the step's own
  std::string env;      ///< --container-env: names whose host values win
  /// --container-save: the squashfs file the node of rank 0 makes of the
  /// container's root once the ranks have ended (relative: to work_dir);
  /// empty: none.
  std::string save;
  bool mount_home = false;
  bool remap_root = false;
  bool writable = true;
  bool entrypoint = false;
  ImageStore images;      ///< where the node's images come from and are kept
  std::string hooks_dir;  ///< programs the holder runs before the ranks enter; empty: none
  std::string state_dir;  ///< the node's named containers of the job
  std::vector<std::string> devices;  ///< the GPUs' device files the step may use
  [[nodiscard]] bool Enabled() const { return !image.empty() || !name.empty(); }
};

/// How CUDA will number the launch's GPUs: by the node's indices, or from 0
/// over the GPUs the ranks can open, when the others' device files are
/// denied (a device cgroup) or absent (a container's /dev), as CUDA then
/// enumerates only those (Slurm sets them so under ConstrainDevices=yes).
enum class GpuNumbering { kNode, kConfined };

/// One job's launch on one node, in the agent's terms (the proto Launch,
/// without the wire).
struct LaunchPlan {
  launch::LaunchContext context;  ///< node_name, ranks and environment
  std::vector<std::string> argv;  ///< the program and its arguments
  std::string script;             ///< a batch script's text; when set it replaces argv[0]
  std::string work_dir;           ///< where the ranks start; created when missing
  std::string output;             ///< stdout pattern (ExpandOutputPattern); empty: cohort-%j.out
  std::string error;              ///< stderr pattern; empty: the same file as stdout
  OpenMode open_mode = OpenMode::kTruncate;  ///< the job's --open-mode
  std::uint32_t umask = 022;                 ///< the submitter's: the ranks' own and their files'
  RunAs run_as = RunAs::kStepd;
  std::uint32_t uid = 0;       ///< the job's owner
  std::int64_t memory_mb = 0;  ///< the job's memory on this node; 0: no limit
  /// By local rank: GPUs (CUDA_VISIBLE_DEVICES), NICs (NCCL_IB_HCA), CPUs and
  /// NUMA memory (binding.h). Empty: no plan; ranks see every granted GPU.
  std::vector<binding::RankBinding> bindings;
  /// Bind CPUs and memory as planned (real nodes); otherwise only the
  /// environment follows the plan (emulated nodes share one host).
  bool apply_binding = false;
  StepIo io;                 ///< a step's `cohort run` to stream output to; none: the files
  ContainerSetup container;  ///< a step's container; not Enabled(): none
  /// kConfined: CUDA_VISIBLE_DEVICES counts from 0 over context.gpus.
  GpuNumbering gpu_numbering = GpuNumbering::kNode;
  /// The node's GPUs are AMD's: ROCR_VISIBLE_DEVICES takes the devices
  /// CUDA_VISIBLE_DEVICES would name, and HIP (which reads both
  /// HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES on top of ROCr's) counts
  /// them 0..k-1 in that order.
  bool rocm = false;
};

/// One local rank of a launch.
struct RankLaunch {
  int rank = 0;                              ///< global
  std::vector<std::string> env;              ///< NAME=value, ready for execve
  std::string output;                        ///< stdout file
  std::string error;                         ///< stderr file; empty: the stdout file
  OpenMode output_mode = OpenMode::kAppend;  ///< kTruncate: this rank truncates it (FileOpenMode)
  OpenMode error_mode = OpenMode::kAppend;
  std::vector<int> cpus;      ///< PU OS indices to bind to; empty: not bound
  std::vector<int> mem_numa;  ///< NUMA nodes for its memory; empty: not bound
};

/// Who truncates an output file under --open-mode=truncate, so that each file
/// is truncated once per launch of the job and never under a rank that
/// already writes to it: the file of a pattern with `%t` by its own rank;
/// one with `%n` or `%N` (one file per node) by the node's first rank; any
/// other (one file for the whole job) by the job's rank 0, on node rank 0,
/// while every other rank and node appends. A later attempt of a requeued
/// job appends, so that the earlier attempt's output stays. Pure.
[[nodiscard]] OpenMode FileOpenMode(OpenMode job_mode, std::string_view pattern,
                                    const launch::LaunchContext& context, int local_rank,
                                    int attempt);

/// What cohort-stepd runs. The program is `script_path` when set (with
/// argv[1..] as its arguments), else argv[0], looked up in `search_path`
/// (the job's PATH, relative to `work_dir`) when it has no slash.
struct LaunchFile {
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string node;
  std::vector<std::string> argv;
  std::string script_path;
  std::string search_path;
  std::string work_dir;
  OpenMode open_mode = OpenMode::kAppend;  ///< the job's; each rank's files say who truncates
  std::uint32_t umask = 022;               ///< set in each rank before its files are opened
  std::vector<RankLaunch> ranks;           ///< in rank order
  std::string agent_socket;                ///< the agent's datagram socket; empty: none
  RunAs run_as = RunAs::kStepd;
  std::uint32_t uid = 0;       ///< the job's owner; used with RunAs::kOwner
  std::int64_t memory_mb = 0;  ///< the job's memory limit on this node; 0: none
  /// The launch's cgroup folders (the agent's): one for cgroup v2, one per
  /// hierarchy for v1; empty: none.
  std::vector<std::string> cgroups;
  /// The PUs the launch holds on the node (binding.h's GrantCpus): its
  /// cgroup's cpuset, and what other jobs' launches keep off. Empty: none
  /// planned.
  std::vector<int> cpus;
  int step = -1;             ///< the step's id, for its I/O Hello; -1: the job's own
  StepIo io;                 ///< set: the ranks' stdio goes over the network
  MpiSetup mpi;              ///< with io: the ranks' PMIx server; empty type: none
  ContainerSetup container;  ///< the ranks' container; not Enabled(): the host
};

/// `cuda_visible_devices` (node indices, comma-separated) as CUDA numbers
/// the GPUs when only `granted` (ascending node indices) can be opened:
/// each by its position among them. An index outside `granted` is kept.
/// Pure.
[[nodiscard]] std::string ConfinedGpuIndices(std::string_view cuda_visible_devices,
                                             const std::vector<int>& granted);

/// Checks a plan and turns it into a launch file: each local rank's
/// environment (BuildRankEnvironment) and output files (patterns expanded,
/// relative to the work dir, each with its FileOpenMode). `script_path` is where the caller wrote
/// plan.script (ignored without a script). InvalidArgument, with the node's
/// name first, for a plan that cannot run anywhere: rank counts out of range,
/// nothing to run, no working directory.
[[nodiscard]] absl::StatusOr<LaunchFile> PlanLaunch(const LaunchPlan& plan, int attempt,
                                                    const std::string& script_path,
                                                    const std::string& agent_socket);

/// Sets NAME=value in a rank's environment `env`, in place of an earlier
/// NAME.
void SetVariable(std::vector<std::string>& env, std::string_view name, std::string_view value);
/// AMD GPUs (LaunchPlan::rocm): ROCR_VISIBLE_DEVICES takes CUDA_VISIBLE_DEVICES'
/// list, and HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES become 0..k-1.
/// Nothing without CUDA_VISIBLE_DEVICES.
void RocmVisibleDevices(std::vector<std::string>& env);

/// The launch file as JSON text.
[[nodiscard]] std::string LaunchFileToJson(const LaunchFile& file);

/// Parses `LaunchFileToJson`'s text. InvalidArgument for text that is not
/// JSON or lacks a field.
[[nodiscard]] absl::StatusOr<LaunchFile> ParseLaunchFile(std::string_view text);

/// The step of the job's own launch (its batch script, or its command as
/// every rank); created steps are 0 and up.
inline constexpr int kOwnLaunch = -1;

/// One launch on a node: a job's attempt and which of its launches.
struct LaunchId {
  std::int64_t job_id = 0;
  int attempt = 0;
  int step = kOwnLaunch;
  friend auto operator<=>(const LaunchId&, const LaunchId&) = default;
};

/// A launch's spool folder name: `job-<id>.<attempt>` for the job's own
/// launch, `job-<id>.<attempt>.<step>` for a step's.
[[nodiscard]] std::string LaunchFolderName(const LaunchId& id);
/// The launch of a folder name; nullopt for any other name.
[[nodiscard]] std::optional<LaunchId> ParseLaunchFolderName(std::string_view name);

}  // namespace cohort::step
