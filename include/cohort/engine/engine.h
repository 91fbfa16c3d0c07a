// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine_types.h"
#include "cohort/engine/explanation.h"
#include "cohort/engine/job.h"
#include "cohort/policy/fair_share.h"
#include "cohort/policy/priority.h"

/// The scheduler's state machine: jobs and nodes in, decisions out. The
/// controller executes the decisions (gRPC to agents); tests assert on them.
namespace cohort {

namespace engine {
struct EngineCore;
}

using alloc::NodeId;

/// Owns every job and node of one cluster. Single-threaded: the controller
/// calls it only from its state thread. Deterministic: same calls, same
/// `now`, same decisions.
class Engine {
 public:
  /// How long an ended job stays in the queue's listings and `cohort show
  /// job` before it leaves memory (Slurm's MinJobAge; the store keeps its
  /// history).
  static constexpr Millis kFinishedRetention = std::chrono::minutes(5);

  /// The topology must outlive the engine.
  Engine(const config::ClusterConfig& config, const topology::Topology& topology,
         alloc::NodePool pool);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  /// Loads what a previous engine left, before any other call. Pending jobs
  /// are resolved again against today's configuration; one that no longer
  /// fits it fails with the reason. Running and stopping jobs take their
  /// grants back; their nodes get NodeTimeout from `now` to register and
  /// report, else they are lost. Jobs it changes are in `effects`.
  void Restore(SavedState state, Millis now, Effects& effects);

  /// Validates and queues a job. InvalidArgument names the field and the
  /// fix; FailedPrecondition says why the job can never run here; a chosen
  /// admission check's refusal (AdmissionPlugins=) comes as it gave it.
  [[nodiscard]] absl::StatusOr<JobId> Submit(JobRequest request, Millis now, Effects& effects);

  struct Preview {
    std::string would_run_on;  ///< hostlist, empty when it would wait
    std::string reason;
  };
  /// Validates like Submit (the configuration's rules and the chosen
  /// admission checks, not the queue's) and says where the job would run now.
  [[nodiscard]] absl::StatusOr<Preview> TestSubmit(const JobRequest& request, Millis now);

  /// Cancels a job (signal 0) or signals its ranks. NotFound, PermissionDenied
  /// (another user's job), FailedPrecondition (finished, or not running for
  /// a signal).
  [[nodiscard]] absl::Status Cancel(JobId job, int signal, const Caller& caller, Millis now,
                                    Effects& effects);
  /// Cancel (signal 0) or signal by reference: `J` of an array is every
  /// task (created or not), `J_i` one task; an uncreated task is dropped
  /// from the array.
  [[nodiscard]] absl::Status Cancel(JobRef ref, int signal, const Caller& caller, Millis now,
                                    Effects& effects);
  /// The jobs a reference names now: an array's created tasks and its
  /// record; empty when none (NotFound from the actions).
  [[nodiscard]] std::vector<JobId> Lookup(JobRef ref) const;

  /// What `scontrol update` may change in a pending job; unset: unchanged.
  struct JobUpdate {
    std::optional<std::chrono::seconds> time_limit;  ///< kUnlimited: none
    std::optional<std::string> partition;
    std::optional<int> nodes;
  };
  /// Changes pending jobs (every pending task of an array) as `update`
  /// says, checked as a submission would be (the configuration's rules and
  /// admission checks). The ranks, GPUs and memory per node stay. Only an
  /// operator may raise the time limit in force, by TimeLimit= or by a
  /// partition's default (as Slurm): PermissionDenied otherwise, and for
  /// another user's job. FailedPrecondition when none is pending or the
  /// job could never run so; InvalidArgument as Submit's.
  [[nodiscard]] absl::Status Update(JobRef ref, const JobUpdate& update, const Caller& caller,
                                    Millis now, Effects& effects);

  /// `cohort hold`: pending jobs stop being eligible. An operator's hold
  /// (JobHeldAdmin) only an operator releases.
  [[nodiscard]] absl::Status Hold(JobRef ref, const Caller& caller, Millis now, Effects& effects);
  [[nodiscard]] absl::Status Release(JobRef ref, const Caller& caller, Millis now,
                                     Effects& effects);
  /// `cohort requeue`: a running job stops and queues again, same id, next
  /// attempt.
  [[nodiscard]] absl::Status Requeue(JobRef ref, const Caller& caller, Millis now,
                                     Effects& effects);
  /// `cohort checkpoint-done`: a job being preempted has saved its state;
  /// it is stopped now instead of at the end of its grace time.
  [[nodiscard]] absl::Status CheckpointDone(JobRef ref, const Caller& caller, Millis now,
                                            Effects& effects);

  /// `cohort run` inside a running job: a job step over some of its
  /// allocation's nodes (src/engine/steps.h says how it is placed). `ref` names
  /// one job or array task. Returns the step's id; NotFound,
  /// PermissionDenied (another user's job), FailedPrecondition (not
  /// running, or the step never fits: what it asks and what the allocation
  /// has), ResourceExhausted (it fits once running steps end).
  /// A non-empty `token` names the step: a step of the job started with the
  /// same token is the answer again (whatever its state), and nothing new
  /// starts, so that a client may ask again when an answer was lost. A node
  /// of the allocation that has not registered since a restart makes the
  /// step wait (ResourceExhausted).
  [[nodiscard]] absl::StatusOr<int> StartStep(JobRef ref, const alloc::StepRequest& request,
                                              const Caller& caller, Millis now, Effects& effects,
                                              const std::string& token = {});
  /// Signals a running step's ranks; signal 0 cancels the step.
  [[nodiscard]] absl::Status SignalStep(JobRef ref, int step, int signal, const Caller& caller,
                                        Millis now, Effects& effects);
  /// A rank of a step exited on `node` (the job's own ranks report through
  /// RankExited). Unknown jobs, steps and nodes are ignored.
  void StepRankExited(JobId job, int step, NodeId node, int exit_code, int signal, Millis now,
                      Effects& effects);
  /// What a rank of the job used (its wait4 usage, its node's GPU samples),
  /// as the agent reports it with the rank's exit: of a step's rank, or
  /// (none) of the job's own launch (AddRankUsage). Unknown jobs and steps,
  /// and figures out of range, are ignored.
  void AddUsage(JobId job, std::optional<int> step, const RankUsage& usage);
  /// A step's launch on `node` failed: the step fails with the reason and its
  /// ranks elsewhere are stopped; the job runs on.
  void StepLaunchFailed(JobId job, int step, NodeId node, const std::string& reason, Millis now,
                        Effects& effects);

  /// `cohort alloc`'s command ended with `exit_code`: its allocation
  /// (JobLaunch::kAllocation) ends, COMPLETED for 0, else FAILED, and its
  /// running steps are stopped. NotFound, PermissionDenied (another user's
  /// job), FailedPrecondition (no allocation of cohort alloc, or not
  /// running).
  [[nodiscard]] absl::Status EndAllocation(JobRef ref, int exit_code, const Caller& caller,
                                           Millis now, Effects& effects);

  /// The multifactor priority of a job at `now`.
  [[nodiscard]] policy::PriorityFactors PriorityOf(const Job& job, Millis now) const;
  /// Fair-share usage (charged up to the last Tick or pass).
  [[nodiscard]] const policy::FairShare& Usage() const;
  /// `cohort why`: the facts of what keeps the job from starting (its
  /// pending task, for an array) and what would start it sooner.
  [[nodiscard]] absl::StatusOr<Explanation> Explain(JobRef ref, Millis now);

  // Agent events. Unknown jobs and nodes are ignored: agents can race the
  // engine (a job cancelled while its launch was on the wire).
  [[nodiscard]] absl::Status NodeRegistered(NodeId node, const NodeReport& report, Millis now,
                                            Effects& effects);
  void NodeHeartbeat(NodeId node, Millis now);
  void RankExited(JobId job, NodeId node, int exit_code, int signal, Millis now, Effects& effects);
  void LaunchFailed(JobId job, NodeId node, const std::string& reason, Millis now,
                    Effects& effects);
  void JobReleased(JobId job, NodeId node, Millis now, Effects& effects);
  /// Whether the job's gang holds `node` now: the only jobs that node's
  /// agent may report on (the controller drops any other report).
  [[nodiscard]] bool Placed(JobId job, NodeId node) const;

  /// Operator actions. PermissionDenied for non-operators; InvalidArgument
  /// for a drain or a DOWN without a reason. DOWN ends the node's jobs
  /// there as its loss would (engine/node_book.h).
  [[nodiscard]] absl::Status Drain(NodeId node, const std::string& reason, const Caller& caller,
                                   Millis now, Effects& effects);
  [[nodiscard]] absl::Status Down(NodeId node, const std::string& reason, const Caller& caller,
                                  Millis now, Effects& effects);
  [[nodiscard]] absl::Status Resume(NodeId node, const Caller& caller, Effects& effects);
  /// An operator's State= of a partition (UP, DOWN, DRAIN, INACTIVE; as
  /// Slurm's): in force over cohort.conf's until set back to it. NotFound
  /// for no such partition.
  [[nodiscard]] absl::Status SetPartitionState(const std::string& partition,
                                               config::PartitionState state, const Caller& caller,
                                               Millis now, Effects& effects);

  /// sacctmgr: adds, modifies or deletes accounts, or users in accounts
  /// (src/engine/account_admin.h), at once, for root and Operators= only;
  /// the audit keeps who and when. Returns the audit entries it made; a
  /// refusal changes nothing.
  [[nodiscard]] absl::StatusOr<std::vector<AccountAudit>> UpdateAccounts(
      const AccountUpdate& update, const Caller& caller, Millis now, Effects& effects);
  /// What a store keeps of sacctmgr's work, with the audit.
  [[nodiscard]] AccountingState Accounting() const;
  /// sacctmgr's changes, oldest first.
  [[nodiscard]] const std::vector<AccountAudit>& AccountsAudit() const;

  /// scontrol create reservation (src/engine/reservations.h), for root and
  /// Operators=. With `node_count` > 0 and no nodes, the gang allocator
  /// chooses that many whole nodes, closest under one switch (at most
  /// `reservation.switches` leaf switches where set), among those free of
  /// other reservations and (unless IGNORE_JOBS) of running jobs that may
  /// outlast the start; at each start it chooses again if some of them
  /// cannot serve then. Without IGNORE_JOBS, nodes whose running jobs may
  /// still run at the start are refused, naming the jobs.
  [[nodiscard]] absl::Status CreateReservation(AdvanceReservation reservation, int node_count,
                                               const Caller& caller, Millis now, Effects& effects);
  /// scontrol update reservation: `reservation` replaces the one of its
  /// name. `node_count` > 0 (or a reservation by count with its Switches=
  /// or time changed) has the allocator choose its nodes again.
  [[nodiscard]] absl::Status UpdateReservation(AdvanceReservation reservation, int node_count,
                                               const Caller& caller, Millis now, Effects& effects);
  /// scontrol delete reservation: its pending jobs are cancelled when next tried.
  [[nodiscard]] absl::Status DeleteReservation(const std::string& name, const Caller& caller,
                                               Effects& effects);
  [[nodiscard]] const std::vector<AdvanceReservation>& Reservations() const;

  /// Time passes: nodes silent for NodeTimeout go DOWN, running jobs near
  /// their limit get their TimeWarning (once per attempt), jobs past it are
  /// stopped, --switches waits expire; while jobs wait, the queue is
  /// ordered afresh (a full pass) every 30 s.
  void Tick(Millis now, Effects& effects);
  /// One input as a value (engine_types.h): the call it stands for, with
  /// its answer (a submission's id in `submitted` when given; OK for the
  /// calls that answer nothing).
  absl::Status Apply(const EngineInput& input, Millis now, Effects& effects,
                     JobId* submitted = nullptr);
  /// One scheduling pass: suspended jobs resume where they fit; pending
  /// jobs, highest partition tier first, then by multifactor priority, start
  /// where they fit; the first `BackfillDepth` that cannot get a
  /// reservation at the earliest time running jobs' limits allow; lower jobs
  /// start only where they delay no reservation (backfill); a job of a
  /// higher tier or preempting QOS that cannot start chooses victims.
  void Schedule(Millis now, Effects& effects);
  /// True when something happened that may let a pending job start.
  [[nodiscard]] bool ScheduleNeeded() const;
  /// Which kind of pass the last Schedule ran (docs/scheduling.md): only the
  /// new jobs ("submission"), the ordered part of the queue after releases
  /// ("release"), or all of it ("full"; "release-full" when a release pass
  /// reached the part of the queue the last full pass left unordered); or
  /// none ("idle") after releases that freed nothing one node of a waiting
  /// job could use.
  [[nodiscard]] std::string_view LastPassKind() const;
  /// How often each trigger has called for a pass since the start, by the
  /// trigger's name (`submitted`, `released`, `node_up`, …; src/engine/pass_triggers.h).
  [[nodiscard]] std::vector<std::pair<std::string_view, std::uint64_t>> PassTriggerCounts() const;

  [[nodiscard]] const Job* FindJob(JobId id) const;
  /// Every job the engine holds, by id.
  [[nodiscard]] const std::map<JobId, Job>& Jobs() const;
  /// 1-based place of a pending job in the order passes try jobs; 0 if not
  /// pending. Sorts the queue: for many jobs, use PendingOrder() once.
  [[nodiscard]] int QueuePosition(JobId id) const;
  /// Pending jobs (an array's untouched tasks count once).
  [[nodiscard]] std::size_t PendingCount() const;
  /// The pending jobs in the order passes try them.
  [[nodiscard]] std::vector<JobId> PendingOrder() const;
  [[nodiscard]] NodeView ViewNode(NodeId node) const;
  [[nodiscard]] NodeAdmin Admin(NodeId node) const;
  /// A partition's state now, and the operator's setting behind it (null:
  /// cohort.conf's State=).
  [[nodiscard]] config::PartitionState PartitionState(const config::PartitionSpec& partition) const;
  [[nodiscard]] const PartitionAdmin* PartitionOverride(std::string_view partition) const;
  [[nodiscard]] std::vector<PartitionAdmin> PartitionOverrides() const;
  /// The id the next submission gets.
  [[nodiscard]] JobId NextId() const;
  [[nodiscard]] const alloc::NodePool& Pool() const;
  [[nodiscard]] const topology::Topology& GetTopology() const;
  [[nodiscard]] const config::ClusterConfig& Config() const;

  /// Checks the invariants: nothing allocated twice, every running gang
  /// whole, pending jobs hold nothing. Returns Internal naming the first
  /// broken one. For tests and debug builds.
  [[nodiscard]] absl::Status CheckInvariants() const;

 private:
  /// Reservations by count whose window began: nodes that cannot serve
  /// have the allocator choose the set again.
  void PlaceReservationsAtStart(Millis now, Effects& effects);

  std::unique_ptr<engine::EngineCore> core_;
};

}  // namespace cohort
