// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/step_ledger.h"
#include "cohort/text/array_spec.h"
#include "cohort/text/dependency.h"

/// Jobs as the core sees them, and the one table through which a job's state
/// changes.
namespace cohort {

using JobId = std::int64_t;
/// Wall-clock time as milliseconds since the Unix epoch. The core never reads
/// a clock: the shell passes `now` into every call.
using Millis = std::chrono::milliseconds;

enum class JobState : std::uint8_t {
  kPending,
  kRunning,
  kCompleting,
  kCompleted,
  kFailed,
  kCancelled,
  kTimeout,
  kNodeFail,
};
inline constexpr int kJobStateCount = 8;

/// Where a job is inside its state. Pending and running jobs have
/// sub-states; a completing job stays kSuspended when it was stopped while
/// suspended (its grants are already back in the pool); every other state
/// has kNone only.
enum class JobSubstate : std::uint8_t {
  kNone,        ///< pending: waiting for its turn; running: running
  kHeldUser,    ///< pending, held by its owner (--hold, cohort hold)
  kHeldAdmin,   ///< pending, held by an operator: only an operator releases it
  kPreempting,  ///< running, warned: stops at Job::preemption.deadline unless it ends first
  kSuspended,   ///< running (or stopping), SIGSTOPped: its grants are lent to its preemptor
};
inline constexpr int kJobSubstateCount = 5;

/// A job's state with its sub-state: what the table of Transition() maps.
struct JobStatus {
  JobState state = JobState::kPending;
  JobSubstate sub = JobSubstate::kNone;
  friend bool operator==(const JobStatus&, const JobStatus&) = default;
};

/// What happens to a job. Each (status, event) pair has one outcome in
/// Transition(); nothing else changes a job's state or sub-state.
enum class JobEvent : std::uint8_t {
  kAllocated,         ///< the whole gang was placed and launched
  kRanksSucceeded,    ///< every rank exited 0
  kRankFailed,        ///< a rank exited non-zero or by a signal
  kLaunchFailed,      ///< a node could not start its ranks
  kCancelled,         ///< the owner or an operator cancelled it
  kTimeLimit,         ///< it ran past its time limit
  kNodeLost,          ///< a node of its gang stopped answering
  kAllReleased,       ///< every node has confirmed its ranks are gone
  kPreempted,         ///< preempted with PreemptMode=REQUEUE (CANCEL uses kCancelled)
  kRequeued,          ///< its owner or an operator asked for it to run again
  kInvalidated,       ///< restored after a configuration change that no longer admits it
  kHeldByUser,        ///< its owner held it (cohort hold)
  kHeldByOperator,    ///< an operator held it
  kReleased,          ///< its hold was lifted (cohort release)
  kPreemptWarned,     ///< chosen as a victim: warned, its grace time runs
  kPreemptCalledOff,  ///< its preemptor no longer waits: it is spared
  kSuspended,         ///< preempted with PreemptMode=SUSPEND: SIGSTOPped
  kResumed,           ///< its preemptor released the resources: SIGCONTed
};
inline constexpr int kJobEventCount = 18;

/// Why a pending job waits, in Slurm's words (PendingReasonName); the detail
/// beside it (Job::reason_detail) says what exactly.
enum class PendingReason : std::uint8_t {
  kNone,                      ///< not tried yet, or released
  kResources,                 ///< the gang does not fit what is free now
  kPriority,                  ///< jobs ahead of it in its partition wait
  kReqNodeNotAvail,           ///< it can never fit (nodes named, --switches, …)
  kDependency,                ///< its --dependency does not hold yet
  kDependencyNeverSatisfied,  ///< its --dependency can never hold
  kJobHeldUser,               ///< held by its owner
  kJobHeldAdmin,              ///< held by an operator
  kQosMaxJobsPerUser,         ///< QOS MaxJobsPerUser reached
  kQosMaxGpusPerUser,         ///< QOS MaxGpusPerUser would be passed
  kQosMaxGpusPerAccount,      ///< QOS MaxGpusPerAccount would be passed
  kJobArrayTaskLimit,         ///< its array runs %N tasks already
  kRequeued,                  ///< back in the queue after a run (preempted, node lost, requeue)
  kBeginTime,                 ///< its --begin time has not come
  kPartitionDown,             ///< its partition is DOWN: it starts nothing
  kPartitionInactive,         ///< its partition is INACTIVE
  kAssocGrpGres,              ///< an account's GrpTRES=gres/gpu would be passed
  kAssocGrpCpu,               ///< an account's GrpTRES=cpu would be passed
  kAssocGrpNode,              ///< an account's GrpTRES=node would be passed
  kAssocGrpJobs,              ///< an account's GrpJobs is reached
  kAssocMaxJobs,              ///< the user's MaxJobs in the account is reached
  kAssocGrpGresMinutes,       ///< an account's GPU-hour budget (GrpTRESMins) would be passed
  kAssocGrpCpuMinutes,        ///< an account's CPU-hour budget would be passed
  kReservation,               ///< its reservation has not started, or ends before its limit
  kReservedForMaintenance,    ///< a maintenance reservation holds the nodes it would need
  kQosGrpGres,                ///< its QOS's GrpTRES=gres/gpu would be passed
  kQosGrpCpu,                 ///< its QOS's GrpTRES=cpu would be passed
  kQosGrpNode,                ///< its QOS's GrpTRES=node would be passed
  kQosGrpJobs,                ///< its QOS's GrpJobs is reached
  kQosGrpGresMinutes,         ///< its QOS's GPU-hour budget (GrpTRESMins) would be passed
  kQosGrpCpuMinutes,          ///< its QOS's CPU-hour budget would be passed
};
inline constexpr int kPendingReasonCount = 31;
/// "Resources", "QOSMaxJobsPerUserLimit", … as Slurm's squeue shows them.
[[nodiscard]] std::string_view PendingReasonName(PendingReason reason);
/// The reason of that name; none for any other text.
[[nodiscard]] std::optional<PendingReason> ParsePendingReason(std::string_view name);

/// Why a job that is stopping stops; decides its final state.
enum class EndCause : std::uint8_t {
  kNone,
  kSuccess,
  kRankFailed,
  kLaunchFailed,
  kCancelled,
  kTimeLimit,
  kNodeLost,
  kNodeLostRequeue,
  kPreemptRequeue,  ///< preempted with PreemptMode=REQUEUE: back to the queue
  kRequeued,        ///< `cohort requeue`: back to the queue
};

/// The status after `event` in `status`, or nullopt when the event does not
/// apply there (it is then ignored), or `status` is no status a job can
/// have (a sub-state its state does not have). A stopping job (kCompleting)
/// keeps the first cause that stopped it; kAllReleased then moves it to
/// FinalState().
[[nodiscard]] std::optional<JobStatus> Transition(JobStatus status, JobEvent event);
/// Whether a job can have that status: the sub-states each state has.
[[nodiscard]] bool IsValid(JobStatus status);
/// The final state a stopping job reaches once released: kPending for a
/// requeue.
[[nodiscard]] JobState FinalState(EndCause cause);
/// The cause an event records when it stops a running job.
[[nodiscard]] EndCause CauseOf(JobEvent event);

/// COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL.
[[nodiscard]] bool IsFinished(JobState state);
[[nodiscard]] std::string_view JobStateName(JobState state);      ///< PENDING, RUNNING, …
[[nodiscard]] std::string_view JobEventName(JobEvent event);      ///< allocated, rank_failed, …
[[nodiscard]] std::string_view JobSubstateName(JobSubstate sub);  ///< none, held_user, …
/// "RUNNING", or with its sub-state "RUNNING/preempting".
[[nodiscard]] std::string JobStatusName(JobStatus status);

/// --signal: a signal the job's ranks get once per attempt, `before` its time
/// limit, so that they can checkpoint. Sent only when the job has a time
/// limit longer than `before`.
struct TimeWarning {
  int signal = 0;  ///< 0: no warning
  std::chrono::seconds before{0};
  bool batch_only = false;  ///< --signal=B:…: only the batch script (global rank 0's process)
};
/// What a job gets when it does not say: SIGUSR1 90 s before its limit.
inline constexpr int kDefaultWarningSignal = 10;  // SIGUSR1 on Linux
inline constexpr std::chrono::seconds kDefaultWarningLead{90};
/// The longest lead a warning may have (as Slurm's sig_time).
inline constexpr std::chrono::seconds kMaxWarningLead{65535};

/// The most one job may ask for (docs/operations.md, "Resource bounds"):
/// checked at submission, before anything sized by them is made.
inline constexpr int kMaxJobNodes = 65536;
inline constexpr int kMaxTasksPerNode = alloc::kMaxTasksPerNode;
inline constexpr int kMaxCpusPerTask = 4096;
inline constexpr int kMaxGpusPerNode = 64;

/// What a gang repair (a lost node replaced by a spare) starts again.
enum class RestartPolicy : std::uint8_t {
  /// The job's own launch, as a new attempt on the repaired allocation: the
  /// batch script, or the command on every rank; its running steps end.
  kJob,
  /// Only what had ranks on the lost node: its steps end (`srun` fails and
  /// the script may run them again on the repaired set); the batch script
  /// restarts only when its own node was lost, a command on every rank
  /// always.
  kStep,
};
/// "job", "step".
[[nodiscard]] std::string_view RestartPolicyName(RestartPolicy policy);
[[nodiscard]] std::optional<RestartPolicy> ParseRestartPolicy(std::string_view text);

/// What a job's own launch runs once its allocation is granted.
enum class JobLaunch : std::uint8_t {
  /// `cohort submit -- CMD`, `cohort run` outside a job: the command as every
  /// rank of the gang, as the batch step running `srun CMD` would.
  kEveryRank,
  /// A batch script: once, on the allocation's first node (the batch step,
  /// ID.batch); `cohort run` inside it starts steps on the allocation.
  kBatchScript,
  /// `cohort alloc`: nothing of its own runs on the nodes; the command on the
  /// submit host starts steps, and ends the allocation (Engine::EndAllocation).
  kAllocation,
};

/// What a user asked for, as the engine needs it. The shell keeps what only
/// the launch needs (command, environment, files).
struct JobRequest {
  std::string name;
  std::string partition;  ///< empty: the default partition
  std::string account;
  std::string user_name;
  std::uint32_t uid = 0;
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  bool overcommit = false;  ///< -O: a node holds one task's CPUs, its tasks share them
  int gpus_per_node = 0;
  std::int64_t memory_mb = 0;
  std::chrono::seconds time_limit{0};  ///< 0: the partition's DefaultTime, else MaxTime
  alloc::Exclusivity exclusivity = alloc::Exclusivity::kShared;
  int switches = 0;  ///< --switches=N; 0: no bound
  std::chrono::seconds switches_wait{0};
  int segment = 0;               ///< --segment=S; 0: no segments
  bool spread_segments = false;  ///< --spread-segments: each segment in a block of its own
  bool requeue = false;
  /// --max-restarts: how often a node failure may requeue it; -1: the
  /// site's MaxBatchRequeue.
  int max_restarts = -1;
  /// --no-kill: a lost node other than the first is dropped from the
  /// running job (its steps there end) rather than ending it.
  bool no_kill = false;
  /// --spares=N: nodes held idle inside the gang's domain, each taking the
  /// place of a node the gang loses (gang repair).
  int spares = 0;
  /// --restart-policy: what a repair starts again.
  RestartPolicy restart_policy = RestartPolicy::kJob;
  std::vector<std::string> features;
  std::vector<std::string> nodelist;  ///< names that must be in the gang
  std::vector<std::string> exclude;   ///< names that must not be
  TimeWarning warning;                ///< default here: none (the shell applies kDefault…)
  std::string qos;                    ///< empty: the cluster's DefaultQOS
  ArraySpec array;                    ///< no tasks: not an array
  Dependency dependency;
  bool hold = false;                 ///< --hold: submitted held
  bool kill_on_invalid_dep = false;  ///< cancel, rather than wait, when the dependency cannot hold
  JobLaunch launch = JobLaunch::kEveryRank;
  std::string gpu_type;     ///< --gres=gpu:TYPE:N: only nodes with GPUs of the type; empty: any
  Millis begin{0};          ///< --begin: not tried before; 0: at once
  Millis deadline{0};       ///< --deadline: cancelled once it cannot end by then; 0: none
  std::string reservation;  ///< --reservation: runs in that reservation only
};

/// One preemption of a job, as `cohort show job` lists it.
struct PreemptionRecord {
  Millis time{0};  ///< when it was chosen and warned
  std::int64_t by_job = 0;
  std::string by_display_id;
  std::string mode;  ///< REQUEUE, CANCEL, SUSPEND
  int attempt = 0;
  int signal = 0;
  std::chrono::seconds grace{0};
  std::string detail;  ///< how it ended: "checkpoint done after 3 s", …
};

/// Where a job step is in its life.
enum class StepState : std::uint8_t {
  kRunning,    ///< its ranks run, or some of them are still stopping
  kCompleted,  ///< every rank exited 0
  kFailed,     ///< a rank exited non-zero or by a signal; the others were stopped
  kCancelled,  ///< stopped by its owner, or its job ended first
};
/// "RUNNING", "COMPLETED", … as `cohort queue --steps` shows them.
[[nodiscard]] std::string_view StepStateName(StepState state);

/// What a launch's ranks used (a step's, or the job's own launch's), added
/// up as each rank's end reports it: its wait4 figures, and what its
/// node's samples saw of the launch's GPUs there (JobAcctGatherFrequency).
struct TaskUsage {
  std::int64_t max_rss_kb = 0;      ///< the largest peak resident memory of one rank (MaxRSS)
  std::int64_t cpu_ms = 0;          ///< their user and system CPU time together (TotalCPU)
  std::int64_t max_cpu_ms = 0;      ///< the most CPU time one rank took
  std::int64_t rss_sum_kb = 0;      ///< their peaks added up: AveRSS is this ÷ ranks
  int ranks = 0;                    ///< ranks whose end was reported
  int gpu_util_max = 0;             ///< percent: the busiest one of its GPUs was
  std::int64_t gpu_util_sum = 0;    ///< each reporting rank's node's average per GPU, added up
  int gpu_ranks = 0;                ///< ranks whose node measured its GPUs
  std::int64_t gpu_mem_max_mb = 0;  ///< the most memory one of its GPUs held
  std::int64_t gpu_mem_sum_mb = 0;  ///< each reporting rank's node's average per GPU, added up
};

/// One rank's end, as usage (Engine::AddUsage).
struct RankUsage {
  std::int64_t max_rss_kb = 0;
  std::int64_t cpu_ms = 0;
  bool gpu_measured = false;
  int gpu_util_ave = 0;  ///< percent
  int gpu_util_max = 0;
  std::int64_t gpu_mem_max_mb = 0;
  std::int64_t gpu_mem_ave_mb = 0;
};

/// Adds one rank's end to `usage`; false (nothing added) when a figure is
/// out of range: negative, a percentage past 100, or past a century of
/// CPU time or 2^40 kB, which no node reports but a lying one.
bool AddRankUsage(TaskUsage& usage, const RankUsage& rank);

/// One step of a running job (`cohort run` inside its allocation): ranks on
/// some of the allocation's nodes, placed by its StepLedger.
struct JobStep {
  int id = 0;                      ///< from FirstStep(job) up
  alloc::StepPlacement placement;  ///< node ranks of the allocation
  StepState state = StepState::kRunning;
  Millis start_time{0};
  Millis end_time{0};
  int ranks_exited = 0;  ///< over all its nodes
  /// Ranks that exited, by node of the placement (an agent's report of a
  /// finished launch sets its node's count whole, so reports apply once).
  std::vector<int> node_exits;
  std::string reason;  ///< why it failed, in words; empty when it did not
  /// What `cohort run` named this step with (random), so that asking again
  /// after a lost answer finds it rather than starting a second; empty: none.
  std::string token;
  TaskUsage usage;    ///< what its ranks used
  int exit_code = 0;  ///< its first failing rank's; 0 when every rank exited 0
  int exit_signal = 0;
  bool stopping = false;   ///< its ranks were told to stop (cancelled, or a rank failed)
  bool cancelled = false;  ///< by its owner: it ends CANCELLED, however its ranks exit
  /// MASTER_PORT of its ranks: on its first node, one no other running job
  /// or step there had when it started (a step of an older record: its
  /// job's moved up by its id, as those ranks were given).
  int master_port = 0;
};

namespace engine {
class JobBook;
}  // namespace engine
struct JobStatusForTests;  ///< tests/unit/test_support.h

/// The one key that changes a job's state and sub-state: only the job book
/// (and tests that build jobs in a state) can make one.
class StatusKey {
 private:
  StatusKey() = default;
  friend class engine::JobBook;
  friend struct JobStatusForTests;
};

/// A job's state or its sub-state: read anywhere as the value; changed with
/// a StatusKey alone, so that nothing but the job book's table moves a job.
template <typename T>
class BookKept {
 public:
  constexpr BookKept() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): read as the value it keeps
  constexpr operator T() const { return value_; }
  constexpr void Set(T value, const StatusKey& /*key*/) { value_ = value; }

 private:
  T value_{};
};

/// The current attempt: from the allocation to the release of its nodes.
/// Persisted (JobRunRecord).
struct JobRun {
  EndCause cause = EndCause::kNone;  ///< why it stops, once stopping
  Millis start_time{0};
  Millis end_time{0};
  int attempt = 1;
  /// Attempts that ended in a node failure and were requeued for it: what
  /// --max-restarts and MaxBatchRequeue bound, and the back-off doubles on
  /// (preemptions and `cohort requeue` count as attempts, not here).
  int failure_restarts = 0;
  int exit_code = 0;
  int exit_signal = 0;
  alloc::Placement placement;          ///< grants by node rank while running or stopping
  std::vector<std::uint8_t> released;  ///< by node rank: the node confirmed its ranks are gone
  std::vector<int> exited_ok;          ///< by node rank: ranks there that exited 0
  int master_port = 0;
  int warned_attempt = 0;  ///< the attempt that got its TimeWarning; 0: none yet
  /// The steps of this attempt, in the order they started; `next_step` is
  /// the id the next one gets.
  std::vector<JobStep> steps;
  int next_step = 0;
  /// What the ranks of the job's own launch used (the batch script's, or
  /// the command's run as every rank), as for a step.
  TaskUsage own_usage;
  /// --spares: the spare nodes held for this run, idle, each a whole node
  /// of the gang's shape; a repair moves one into a lost node's rank.
  std::vector<alloc::NodeGrant> spares;
  /// Node ranks lost while running and waiting for the repair decision,
  /// which is made once for every loss that comes within kRepairSettle of
  /// the first (at `repair_at`); empty: none waits.
  std::vector<int> lost_ranks;
  Millis repair_at{0};
  std::string lost_reason;  ///< the first of those losses, in words
  /// IMEX channels held while it runs (SwitchType=switch/nvidia_imex): one,
  /// or one per segment, node rank r's at r × size ÷ nodes. Kept after the
  /// run for the record; held only while the job is active.
  std::vector<int> imex_channels;
  /// Its owner (or an operator) stopped its ranks with SIGSTOP and has not
  /// sent SIGCONT since (scancel --signal=STOP): squeue shows STOPPED.
  bool stopped = false;
};

/// An attempt that ended in a requeue, kept for accounting (`sacct
/// --duplicates` lists it before the current one). Persisted
/// (PastAttemptRecord).
struct PastAttempt {
  int attempt = 0;
  EndCause cause = EndCause::kNone;  ///< kNodeLostRequeue, kPreemptRequeue or kRequeued
  Millis start_time{0};
  Millis end_time{0};
  std::vector<std::string> nodes;  ///< by node rank
  int exit_code = 0;
  int exit_signal = 0;
  std::string reason;  ///< in words, why it ended
  TaskUsage own_usage;
  std::vector<JobStep> steps;  ///< their placements index `nodes`
};
/// The past attempts a job keeps: the most recent ones.
inline constexpr std::size_t kPastAttemptsKept = 16;

/// One repair of a running gang: lost nodes replaced by spares in place.
/// Persisted (RepairRecord).
struct RepairRecord {
  Millis time{0};
  int attempt = 0;                       ///< the attempt it started (the same one with step policy)
  std::vector<std::string> lost;         ///< the nodes replaced, by the order of their node ranks
  std::vector<std::string> replacement;  ///< the spare that took each one's rank
  std::vector<int> node_ranks;           ///< the node ranks repaired
  std::string reason;                    ///< why the first was lost
  std::string restarted;                 ///< what started again, in words
};
/// The repairs a job keeps: the most recent ones.
inline constexpr std::size_t kRepairsKept = 16;
/// How long the engine gathers a gang's node losses before it decides the
/// repair: losses within this of the first (two nodes at once, a leaf
/// switch) are repaired in one decision.
inline constexpr Millis kRepairSettle{1000};

/// What a pending job waits on. Persisted (JobWaitRecord) but for the
/// reason's enum, which is read back from the job's reason text.
struct JobWait {
  /// Why it waits (the engine decides by this); Job::reason is its name.
  PendingReason reason = PendingReason::kNone;
  Millis eligible_time{0};     ///< when it last became eligible (submit, release, requeue)
  Dependency dependency_left;  ///< what is left of --dependency: the terms not yet satisfied
  /// Requeued after a node failure: not started again before this (the
  /// back-off, RequeueBackoff=); 0: no wait.
  Millis restart_after{0};
};

/// Arrays. The array's own record (id == job_id, task_id -1) holds the tasks
/// not yet created in `pending`; each task split off it is a job of its own
/// with a new id. The last task takes the record. Persisted (JobArrayRecord).
struct JobArray {
  JobId job_id = 0;  ///< 0: not an array
  int task_id = -1;
  std::vector<int> pending;
};

/// Preemption: a victim (kPreempting) stops at `deadline` unless it ends or
/// says checkpoint-done first. Persisted (JobPreemptionRecord).
struct JobPreemption {
  std::vector<PreemptionRecord> records;  ///< every preemption, oldest first
  Millis deadline{0};                     ///< set while kPreempting, else 0
  JobId by = 0;                           ///< the preemptor, while preempted
  Millis suspended_since{0};              ///< set while kSuspended, else 0
};

/// The running engine's own: never persisted, made again after a restart.
struct JobCache {
  /// The time up to which fair-share usage has been charged.
  Millis charged_until{0};
  /// The last backfill plan's start estimate and nodes (a preemptor's: its
  /// victims' nodes, with no estimate), which the shell uses to make the
  /// nodes ready ahead (container images).
  Millis expected_start{0};
  std::vector<alloc::NodeId> planned_nodes;
  std::int64_t priority = 0;  ///< the last pass's multifactor total
  int share_slot = -1;        ///< the engine's number for (account, user)
};

/// A job and everything the engine knows of it, in groups: what was asked
/// (fixed at submission), its status, and the run, the wait, the array, the
/// preemption and the caches. Each persisted group has one record mapping
/// (daemons/controller/store/records.cpp).
struct Job {
  JobId id = 0;
  JobRequest request;
  alloc::GangRequest gang;             ///< resolved against the cluster at submit
  std::chrono::seconds time_limit{0};  ///< in force
  int priority_tier = 0;
  std::string qos;  ///< resolved
  Millis submit_time{0};
  /// Changed by the job book alone (JobBook::SetState, through the table).
  BookKept<JobState> state;
  BookKept<JobSubstate> sub;
  /// Pending: the name of its wait reason; finished: in words, why it ended.
  std::string reason;
  std::string reason_detail;
  JobRun run;
  std::vector<PastAttempt> past_attempts;  ///< oldest first, at most kPastAttemptsKept
  std::vector<RepairRecord> repairs;       ///< oldest first, at most kRepairsKept
  JobWait wait;
  JobArray array;
  JobPreemption preemption;
  JobCache cache;
};

[[nodiscard]] inline JobStatus StatusOf(const Job& job) { return {job.state, job.sub}; }
/// The job has no plan to start (it started, or waits with no reservation).
inline void ForgetPlan(Job& job) {
  job.cache.expected_start = Millis{0};
  job.cache.planned_nodes.clear();
}
/// Held by its owner or by an operator.
[[nodiscard]] inline bool IsHeld(const Job& job) {
  return job.sub == JobSubstate::kHeldUser || job.sub == JobSubstate::kHeldAdmin;
}
/// SIGSTOPped by a preemption, running or stopping: its grants are in the pool.
[[nodiscard]] inline bool IsSuspended(const Job& job) { return job.sub == JobSubstate::kSuspended; }
/// The GPUs the gang asks for, over all its nodes.
/// The GPUs the gang asks for, over all its nodes and its spares (which
/// hold theirs idle).
[[nodiscard]] inline int GpusAsked(const Job& job) {
  return job.gang.gpus_per_node * (job.gang.nodes + job.gang.spares);
}
/// The job's own spare on `node`: its index in run.spares, else -1.
[[nodiscard]] inline int SpareIndexOf(const Job& job, alloc::NodeId node) {
  for (std::size_t i = 0; i < job.run.spares.size(); ++i) {
    if (job.run.spares[i].node == node) return static_cast<int>(i);
  }
  return -1;
}

/// A node rank a running --no-kill job lost and went on without (while it
/// runs, only such a rank is released, or one lost and waiting for its
/// repair).
[[nodiscard]] inline bool Dropped(const Job& job, std::size_t rank) {
  return job.state == JobState::kRunning && rank < job.run.released.size() &&
         job.run.released[rank] != 0 &&
         (job.request.no_kill || std::find(job.run.lost_ranks.begin(), job.run.lost_ranks.end(),
                                           static_cast<int>(rank)) != job.run.lost_ranks.end());
}

/// Whether the job runs a batch script once (JobLaunch::kBatchScript).
[[nodiscard]] inline bool IsBatch(const Job& job) {
  return job.request.launch == JobLaunch::kBatchScript;
}
/// The id of a job's first created step: 1 in a job whose command runs as
/// every rank (that launch is step 0, as `srun CMD` in a batch step would
/// be), else 0.
[[nodiscard]] inline int FirstStep(const Job& job) {
  return job.request.launch == JobLaunch::kEveryRank ? 1 : 0;
}
/// The ranks of the job's own launch on node rank `node_rank`: a command
/// run as every rank has tasks_per_node everywhere, a batch script 1 on node
/// rank 0, an allocation none.
[[nodiscard]] inline int OwnRanksOn(const Job& job, int node_rank) {
  switch (job.request.launch) {
    case JobLaunch::kEveryRank:
      return job.gang.tasks_per_node;
    case JobLaunch::kBatchScript:
      return node_rank == 0 ? 1 : 0;
    case JobLaunch::kAllocation:
      return 0;
  }
  return 0;
}
/// The ranks of the job's own launch over all its nodes.
[[nodiscard]] inline int OwnRanks(const Job& job) {
  switch (job.request.launch) {
    case JobLaunch::kEveryRank:
      return job.gang.nodes * job.gang.tasks_per_node;
    case JobLaunch::kBatchScript:
      return 1;
    case JobLaunch::kAllocation:
      return 0;
  }
  return 0;
}

/// How users write a job's id: "12", "12_3" for task 3 of array 12, and
/// "12_[4-999%8]" for the tasks of array 12 not yet started.
[[nodiscard]] std::string DisplayId(const Job& job);

}  // namespace cohort
