// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/step_ledger.h"
#include "cohort/engine/job.h"
#include "cohort/policy/fair_share.h"

/// The engine's values: the commands it decides, the transitions and
/// changes it reports (Effects), what agents report to it, and the views
/// it gives. The engine (cohort/engine.h) and each of its parts speak them;
/// a part that only reports effects includes this, not the engine.
namespace cohort {

using alloc::NodeId;

/// Start one node's share of a gang. The shell adds the command, environment
/// and files it keeps for the job.
struct LaunchCommand {
  JobId job = 0;
  NodeId node = 0;
  int node_rank = 0;
  alloc::NodeGrant grant;  ///< for a step: what the step holds on the node
  std::optional<int>
      step{};  ///< a step inside the allocation (Job::run.steps); none: the job's own
};
/// Which of a job's processes on a node a signal reaches.
enum class SignalScope : std::uint8_t {
  /// Everything of the job there: the batch script and every rank (suspend,
  /// resume).
  kAll,
  /// Every rank: a command's ranks run as every rank, and every step's; not
  /// the batch script, as Slurm's scancel and --signal leave it alone.
  kRanks,
  /// The batch script alone (--signal=B:, scancel --batch); for a command
  /// run as every rank, global rank 0's process.
  kBatch,
};

/// Send a signal to the job's processes on the node, as `scope` says, or
/// to one step's ranks.
struct SignalCommand {
  JobId job = 0;
  NodeId node = 0;
  int signal = 0;
  SignalScope scope = SignalScope::kRanks;
  std::optional<int> step{};  ///< only that step's ranks; none: as `scope` says
};
/// Stop the job's ranks on the node: SIGTERM, SIGKILL after KillWait; the
/// node answers with JobReleased. With a step, only that step's ranks stop,
/// and the node answers with their exits.
struct TerminateCommand {
  JobId job = 0;
  NodeId node = 0;
  std::optional<int> step{};
  int attempt = 0;  ///< the attempt it stops (a node may not have seen it); 0: any
};
using Command = std::variant<LaunchCommand, SignalCommand, TerminateCommand>;

/// A job that changed state, and the event that moved it (job.h's table).
struct JobTransition {
  JobId job = 0;
  std::optional<JobStatus> from;  ///< none: a new job (submitted, or an array task split off)
  JobStatus to;
  std::optional<JobEvent> event;  ///< none for a new job
};

/// What one call decided: commands for agents, and what changed (for
/// watchers, logs and persistence).
struct Effects {
  std::vector<Command> commands;
  /// Every change of state, in the order it happened.
  std::vector<JobTransition> transitions;
  std::vector<JobId> changed_jobs;
  std::vector<NodeId> changed_nodes;
  bool changed_partitions = false;    ///< an operator's partition State= (PartitionAdmin)
  bool changed_accounts = false;      ///< sacctmgr changed the account tree (AccountingState)
  bool changed_reservations = false;  ///< a reservation was made, changed, rolled or ended
  /// Finished jobs past their retention, which the engine no longer knows:
  /// what the caller keeps of them can go too.
  std::vector<JobId> forgotten_jobs;
};

/// How long an agent keeps a finished launch and lists it when it registers,
/// at least (a contract between agents and the engine): a launch an agent
/// got is in its report, running or finished, for this long after its job
/// started, so a registration that lists nothing of a job started less long
/// ago means the launch never reached the node.
inline constexpr std::chrono::minutes kAgentKeepsFinishedLaunches{10};

/// A job with ranks still alive on a registering node.
struct RunningReport {
  JobId job = 0;
  int attempt = 0;            ///< 0: not said (any attempt)
  int ranks_ok = 0;           ///< ranks there that already exited 0
  std::optional<int> step{};  ///< a created step's launch; none: the job's own
};
/// A job whose ranks on a registering node have all ended. Agents keep these
/// for a while and report them in every registration, so an engine restored
/// from an older state learns what it missed; applying one twice is harmless.
struct FinishedReport {
  JobId job = 0;
  int attempt = 0;
  int ranks_ok = 0;
  bool failed = false;  ///< some rank failed; exit_code/signal are the first failure's
  int exit_code = 0;
  int signal = 0;
  std::string launch_error;   ///< non-empty: the launch itself failed
  std::optional<int> step{};  ///< a created step's launch; none: the job's own
  int ranks = 0;              ///< ranks the launch started (steps: its node's count)
};

/// What an agent reports when it registers.
struct NodeReport {
  int cpus = 0;
  std::int64_t memory_mb = 0;
  int gpus = 0;
  std::vector<std::uint64_t> gpu_groups;
  std::vector<RunningReport> running;
  std::vector<FinishedReport> finished;
};

/// What an operator set on a node (or the controller, draining it), which
/// outlives a controller restart: drained, set DOWN, or both; why, by whom
/// and since when.
struct NodeAdmin {
  bool drain = false;
  bool down = false;  ///< set DOWN by an operator: no work until resumed
  std::string reason;
  std::optional<std::uint32_t> uid;  ///< who set it; none: the controller
  Millis since{0};                   ///< when; 0: not known (an older store)
  friend bool operator==(const NodeAdmin&, const NodeAdmin&) = default;
};

/// An operator's State= of a partition (scontrol update PartitionName=…),
/// in force over cohort.conf's until set back to it; outlives a restart.
struct PartitionAdmin {
  std::string name;
  config::PartitionState state = config::PartitionState::kUp;
  std::optional<std::uint32_t> uid;  ///< who set it
  Millis since{0};                   ///< when
  friend bool operator==(const PartitionAdmin&, const PartitionAdmin&) = default;
};

/// Flags= of a reservation, as Slurm's.
enum ReservationFlag : std::uint32_t {
  kResvMaint = 1U << 0,       ///< MAINT: maintenance; its nodes show MAINT while it is active
  kResvIgnoreJobs = 1U << 1,  ///< IGNORE_JOBS: made even where running jobs may still run
  kResvFlex = 1U << 2,        ///< FLEX: its jobs may also use other nodes, and outlast it
  kResvDaily = 1U << 3,       ///< DAILY: once it ends it comes again a day later
  kResvWeekly = 1U << 4,      ///< WEEKLY: a week later
  kResvOverlap = 1U << 5,     ///< OVERLAP: may share nodes and time with another reservation
};
/// "MAINT,DAILY", in the order above; "(null)" for none.
[[nodiscard]] std::string ReservationFlagNames(std::uint32_t flags);
/// The flags of "MAINT,DAILY" (any case; empty or "(null)": none);
/// InvalidArgument names a flag that is none of them.
[[nodiscard]] absl::StatusOr<std::uint32_t> ParseReservationFlags(std::string_view names);

/// An operator's reservation (scontrol create reservation): nodes held
/// from `start` to `end` for its users and accounts. A job without
/// --reservation keeps off them while its time limit would run into the
/// window; a job of the reservation runs on them only, inside it.
struct AdvanceReservation {
  std::string name;
  Millis start{0};
  Millis end{0};
  std::vector<NodeId> nodes;          ///< sorted; by Nodes=, or chosen for NodeCnt=
  std::vector<std::string> users;     ///< Users=: who may run in it; with accounts: either
  std::vector<std::string> accounts;  ///< Accounts=
  std::string partition;              ///< PartitionName=: its jobs' partition; empty: any
  std::uint32_t flags = 0;            ///< ReservationFlag bits
  std::uint32_t uid = 0;              ///< who made it
  Millis created{0};
  /// NodeCnt=: the gang allocator chose the nodes, and at each start it
  /// chooses again if some cannot serve (down, drained, or busy with jobs
  /// not the reservation's), in the same shape.
  bool by_count = false;
  int switches = 0;      ///< Switches=: by count, at most this many leaf switches
  Millis placed_for{0};  ///< the start whose nodes were checked (not kept)
  friend bool operator==(const AdvanceReservation&, const AdvanceReservation&) = default;
};
/// Reservations the engine takes, and the longest one.
inline constexpr std::size_t kMaxReservations = 1'000;
inline constexpr std::chrono::hours kMaxReservationLength{24 * 366};

/// What a store keeps of an engine: every job not yet finished (and any
/// finished ones it wants shown again), the next id, and operators' node
/// settings by name.
/// A job as the store kept it, and the status it had: the job book sets
/// that as the job enters it (JobBook::Restore).
struct SavedJob {
  Job job;
  JobStatus status;
};

/// sacctmgr's add, modify or delete of accounts or of users in accounts.
struct AccountUpdate {
  std::string verb;                ///< add, modify, delete (any case)
  std::string entity;              ///< account, user, qos
  std::vector<std::string> names;  ///< the accounts, the users, or the QOS
  /// For users: the accounts they are added to, or modified or deleted in
  /// (empty with modify and delete: every account of theirs).
  std::vector<std::string> accounts;
  /// Key=Value words to set: Parent, Fairshare, Description, Organization,
  /// DefaultAccount, GrpTRES, GrpTRESMins, GrpJobs, MaxJobs, MaxSubmitJobs,
  /// MaxTRESPerJob, QOS, DefaultQOS; a QOS's keys (Priority, MaxWall, …).
  std::vector<std::pair<std::string, std::string>> set;
};

/// One change to the accounts, as `sacctmgr show transactions` lists it.
struct AccountAudit {
  Millis time{0};
  std::uint32_t uid = 0;  ///< who made it
  std::string action;     ///< "Add Account", "Modify User", …
  std::string where;      ///< what it changed: "vision", "bob in vision"
  std::string info;       ///< the settings given
};

/// What sacctmgr made, as a store keeps it: its accounts whole, cohort.conf's
/// accounts only with the users sacctmgr added to them, users' default
/// accounts, and the audit.
struct AccountingState {
  std::vector<config::AccountSpec> accounts;
  std::vector<std::pair<std::string, std::string>> default_accounts;  ///< (user, account)
  std::vector<AccountAudit> audit;   ///< oldest first, the last kAuditKept
  std::vector<config::QosSpec> qos;  ///< the QOS sacctmgr made
};
/// The audit entries kept (and shown); older ones are dropped.
inline constexpr std::size_t kAuditKept = 10'000;

struct SavedState {
  std::vector<SavedJob> jobs;  ///< placement grants and released flags as they were
  JobId next_id = 1;
  std::vector<std::pair<NodeId, NodeAdmin>> nodes;
  std::vector<policy::UsageRecord> usage;  ///< fair-share usage
  std::vector<PartitionAdmin> partitions;  ///< operators' partition states
  AccountingState accounting;              ///< sacctmgr's accounts and audit
  std::vector<AdvanceReservation> reservations;
};

/// A job as users name it: `12` (a job, or every task of array 12) or
/// `12_3` (task 3 of array 12, created or not).
struct JobRef {
  JobId job = 0;
  int task = -1;  ///< -1: the whole job
};

enum class NodeStatus : std::uint8_t {
  kUnknown,  ///< no agent has registered
  kIdle,
  kMixed,
  kAllocated,
  kDraining,
  kDrained,
  kDown,
};
[[nodiscard]] std::string_view NodeStatusName(NodeStatus status);

struct NodeView {
  NodeStatus status = NodeStatus::kUnknown;
  std::string reason;
  /// Who gave `reason` (an operator's drain or DOWN); none: the controller.
  std::optional<std::uint32_t> reason_uid;
  Millis reason_time{0};  ///< when it was given; 0: no reason, or not known
  std::vector<JobId> jobs;
  /// Not heard from for several heartbeats (a third of NodeTimeout, at least
  /// 3 s), not yet NodeTimeout: Slurm's NOT_RESPONDING, `idle*`.
  bool not_responding = false;
  Millis last_heard{0};  ///< its agent's last message; 0: none since the start
};

/// Identity of a caller, as the shell established it.
struct Caller {
  std::uint32_t uid = 0;
  bool operator_listed = false;  ///< a user of Operators= in cohort.conf
  /// Root and Operators= may act on every job and node.
  [[nodiscard]] bool IsOperator() const { return uid == 0 || operator_listed; }
};

/// The engine's inputs as values, one type for all (Engine::Apply): what a
/// scenario script (`cohort-sim --script`) or a recorded run replays. Each
/// is one of the engine's calls with its arguments.
namespace input {
struct Submit {
  JobRequest request;
};
struct Cancel {
  JobRef job;
  int signal = 0;  ///< 0: cancel; else the signal for its ranks
  Caller caller;
};
struct Hold {
  JobRef job;
  Caller caller;
};
struct Release {
  JobRef job;
  Caller caller;
};
struct Requeue {
  JobRef job;
  Caller caller;
};
struct CheckpointDone {
  JobRef job;
  Caller caller;
};
struct NodeRegistered {
  NodeId node = 0;
  NodeReport report;
};
struct Heartbeat {
  NodeId node = 0;
};
struct Drain {
  NodeId node = 0;
  std::string reason;
  Caller caller;
};
struct Resume {
  NodeId node = 0;
  Caller caller;
};
struct Down {
  NodeId node = 0;
  std::string reason;
  Caller caller;
};
struct RankExited {
  JobId job = 0;
  NodeId node = 0;
  int exit_code = 0;
  int signal = 0;
};
struct JobReleased {
  JobId job = 0;
  NodeId node = 0;
};
struct LaunchFailed {
  JobId job = 0;
  NodeId node = 0;
  std::string reason;
};
struct StartStep {
  JobRef job;
  alloc::StepRequest request;
  Caller caller;
};
struct SignalStep {
  JobRef job;
  int step = 0;
  int signal = 0;  ///< 0: cancel the step
  Caller caller;
};
struct StepRankExited {
  JobId job = 0;
  int step = 0;
  NodeId node = 0;
  int exit_code = 0;
  int signal = 0;
};
struct EndAllocation {
  JobRef job;
  int exit_code = 0;
  Caller caller;
};
struct Tick {};
struct Schedule {};
}  // namespace input

using EngineInput =
    std::variant<input::Submit, input::Cancel, input::Hold, input::Release, input::Requeue,
                 input::CheckpointDone, input::NodeRegistered, input::Heartbeat, input::Drain,
                 input::Resume, input::Down, input::RankExited, input::JobReleased,
                 input::LaunchFailed, input::StartStep, input::SignalStep, input::StepRankExited,
                 input::EndAllocation, input::Tick, input::Schedule>;

}  // namespace cohort
