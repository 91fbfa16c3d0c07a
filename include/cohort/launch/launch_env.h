// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// What a rank sees when it starts: its environment and the names of its
/// output files. Pure functions of the launch; safe from any thread. The agent
/// fills a LaunchContext from the controller's Launch message.
namespace cohort::launch {

/// One environment variable as the user exported it.
struct EnvVar {
  std::string name;
  std::string value;
};

/// What one launch on a node runs.
enum class LaunchKind : std::uint8_t {
  kGang,   ///< a command as every rank of the gang (one step over it all)
  kBatch,  ///< a batch script, once, on the allocation's first node (the batch step)
  kStep,   ///< a step's ranks on some of the allocation's nodes (`cohort run` inside a job)
};

/// Where a step's ranks on this node sit in the step (LaunchKind::kStep).
struct StepLayout {
  std::string nodelist;  ///< the step's nodes, as a hostlist
  int num_nodes = 1;
  int node_index = 0;          ///< this node among them, 0-based
  int first_rank = 0;          ///< the step's rank of this node's first task
  int tasks = 1;               ///< the step's tasks on this node
  int num_tasks = 1;           ///< over all its nodes
  std::string tasks_per_node;  ///< Slurm's form: "2(x3),1"
};

/// The facts of one job's launch on one node that a rank's environment and
/// file names are made of (the proto `Launch` message, without the wire).
struct LaunchContext {
  std::int64_t job_id = 0;
  std::string job_name;
  std::string user_name;
  std::string partition;
  std::string cluster_name;
  std::string nodelist;  ///< the gang as a hostlist, in node-rank order
  int num_nodes = 1;
  int node_rank = 0;  ///< this node's index in the gang, 0-based
  std::string node_name;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  bool overcommit = false;  ///< -O: SLURM_OVERCOMMIT=1, as Slurm sets it
  std::vector<int> gpus;    ///< GPU indices granted on this node, ascending
  std::string master_addr;
  int master_port = 0;  ///< 0: none given
  std::string submit_dir;
  std::vector<EnvVar> base_env;   ///< what the user exported, in order
  std::int64_t time_limit_s = 0;  ///< in force; 0: none
  /// The job's start, seconds since the epoch (0: unknown): with the time
  /// limit, SLURM_JOB_START_TIME and SLURM_JOB_END_TIME, as Slurm 23.02+.
  std::int64_t job_start_s = 0;
  std::string account;            ///< SLURM_JOB_ACCOUNT; empty: not set
  int cpus_on_node = 0;           ///< CPUs granted on this node; 0: not set
  std::int64_t memory_mb = 0;     ///< memory per node asked for; 0: not set
  std::int64_t array_job_id = 0;  ///< a job array's id; 0: not an array task
  int array_task_id = -1;         ///< its index in the array; -1: not an array task
  int array_task_min = 0;         ///< SLURM_ARRAY_TASK_MIN (array tasks only)
  int array_task_max = 0;         ///< SLURM_ARRAY_TASK_MAX
  int array_task_count = 0;       ///< SLURM_ARRAY_TASK_COUNT
  int array_task_step = 1;        ///< SLURM_ARRAY_TASK_STEP
  int step_id = 0;                ///< SLURM_STEP_ID: the job step the ranks belong to
  int restart_count = 0;          ///< SLURM_RESTART_COUNT: the attempt's number less one
  LaunchKind kind = LaunchKind::kGang;
  StepLayout step;  ///< for kStep
  /// A step's MPI wire-up (srun --mpi): "pmix", or "none"; SLURM_MPI_TYPE.
  /// Empty: not a step, or an agent's of a controller without it.
  std::string mpi_type;
  /// SLURM_TOPOLOGY_ADDR and SLURM_TOPOLOGY_ADDR_PATTERN: this node's place
  /// in the switch tree and blocks; empty: not set.
  std::string topology_addr;
  std::string topology_addr_pattern;
  /// The IMEX channel of this node's ranks (SwitchType=switch/nvidia_imex):
  /// NVIDIA_IMEX_CHANNELS, as the NVIDIA container toolkit reads it; -1: none.
  int imex_channel = -1;
};

/// How many ranks the launch starts on this node: tasks_per_node for a
/// gang, 1 for a batch script, the step's tasks here for a step.
[[nodiscard]] int LocalTasks(const LaunchContext& context);
/// The global rank (the step's, for a step) of local rank `local_rank`.
[[nodiscard]] std::int64_t GlobalRank(const LaunchContext& context, int local_rank);

/// The environment of local rank `local_rank` (0 ≤ local_rank <
/// tasks_per_node) as `NAME=value` strings, ready for execve.
///
/// First the base environment, in order, each name once (a later duplicate
/// replaces the value of the first; entries whose name is empty or holds '='
/// are dropped). Then, replacing any base entry of the same name, in this
/// order:
///   COHORT_JOB_ID COHORT_JOB_NAME COHORT_NODELIST COHORT_NNODES
///   COHORT_NODE_RANK COHORT_NODENAME COHORT_CLUSTER COHORT_PARTITION
///   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK
///   MASTER_ADDR MASTER_PORT
///   SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NAME SLURM_JOB_NODELIST SLURM_NODELIST
///   SLURM_JOB_NUM_NODES SLURM_NNODES SLURM_NTASKS SLURM_NPROCS
///   SLURM_NTASKS_PER_NODE SLURM_NODEID SLURM_PROCID SLURM_LOCALID
///   SLURM_CPUS_PER_TASK SLURM_SUBMIT_DIR SLURM_JOB_PARTITION
///   SLURM_CLUSTER_NAME SLURMD_NODENAME SLURM_JOB_USER SLURM_TASKS_PER_NODE
///   SLURM_STEP_ID SLURM_STEPID SLURM_STEP_NODELIST SLURM_STEP_NUM_NODES
///   SLURM_STEP_NUM_TASKS SLURM_STEP_TASKS_PER_NODE (a gang's launch is one
///   step over the whole gang)
///   and, when known, SLURM_JOB_ACCOUNT SLURM_CPUS_ON_NODE
///   SLURM_JOB_CPUS_PER_NODE SLURM_MEM_PER_NODE SLURM_GPUS_ON_NODE
///   SLURM_JOB_GPUS SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN
///   SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_STEP and
///   the same as COHORT_ARRAY_*
///   CUDA_VISIBLE_DEVICES
/// with Slurm's meanings: the global rank is node_rank * tasks_per_node +
/// local_rank, the world size num_nodes * tasks_per_node, the node lists are
/// the gang compressed as Slurm prints it (`gpu[001-004]`; a nodelist that
/// does not parse is passed on as written). MASTER_ADDR falls back to the
/// gang's first node when the context has none, and is left to the base
/// environment when there is no nodelist either; MASTER_PORT is left to the
/// base environment when the context's is 0. CUDA_VISIBLE_DEVICES is the
/// comma list of the granted GPU indices, and is absent (a base entry of it
/// removed) when the node grants none, so a CPU-only rank never sees the
/// submitter's GPUs.
///
/// A batch script (kBatch) is no rank of a training world: it gets neither
/// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK nor
/// SLURM_STEP_*, and SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID are 0, as
/// in Slurm's batch step. A step's ranks (kStep) are numbered within the
/// step: RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, SLURM_PROCID,
/// SLURM_NODEID, SLURM_NTASKS, SLURM_NNODES, SLURM_NODELIST, SLURM_TASKS_PER_NODE,
/// COHORT_NODELIST, COHORT_NNODES, COHORT_NODE_RANK and SLURM_STEP_* are the
/// step's, while SLURM_JOB_NODELIST and SLURM_JOB_NUM_NODES stay the
/// allocation's, as `srun` inside `sbatch` sets them.
///
/// Cost: expands and compresses the nodelist, O(n log n) in the gang's size.
[[nodiscard]] std::vector<std::string> BuildRankEnvironment(const LaunchContext& context,
                                                            int local_rank);

/// Counts per node in Slurm's compressed form, as SLURM_TASKS_PER_NODE
/// writes them: runs of one count become `count(xN)`: {2,2,2,1} is
/// "2(x3),1".
[[nodiscard]] std::string FormatCountsPerNode(const std::vector<int>& counts);
/// The counts of FormatCountsPerNode's text, for at most `most` nodes;
/// InvalidArgument, naming the text, for anything else.
[[nodiscard]] absl::StatusOr<std::vector<int>> ParseCountsPerNode(std::string_view text,
                                                                  std::size_t most);

/// Expands an output file pattern as sbatch does: `%j` job id, `%x` job name,
/// `%u` user name, `%N` node name, `%n` node rank, `%t` the global rank
/// `global_rank`, `%%` a percent sign. Any other `%c`, and a trailing `%`,
/// are kept as written.
[[nodiscard]] std::string ExpandOutputPattern(std::string_view pattern,
                                              const LaunchContext& context, int global_rank);

/// True when the pattern names one file per rank, that is it holds `%t`
/// (`%%t` is a literal, not a rank).
[[nodiscard]] bool PatternIsPerRank(std::string_view pattern);

}  // namespace cohort::launch
