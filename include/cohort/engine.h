// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/cluster_config.h"
#include "cohort/fair_share.h"
#include "cohort/gang_allocator.h"
#include "cohort/job.h"
#include "cohort/node_pool.h"
#include "cohort/priority.h"
#include "cohort/reservation_timeline.h"
#include "cohort/topology.h"

/// The scheduler's state machine: jobs and nodes in, decisions out. The
/// controller executes the decisions (gRPC to agents); tests assert on them.
namespace cohort {

using alloc::NodeId;

/// Start one node's share of a gang. The shell adds the command, environment
/// and files it keeps for the job.
struct LaunchCommand {
  JobId job = 0;
  NodeId node = 0;
  int node_rank = 0;
  alloc::NodeGrant grant;
};
/// Send a signal to the job's ranks on the node: to their process group, or
/// with `batch_only` to global rank 0's process alone (--signal=B:).
struct SignalCommand {
  JobId job = 0;
  NodeId node = 0;
  int signal = 0;
  bool batch_only = false;
};
/// Stop the job's ranks on the node: SIGTERM, SIGKILL after KillWait; the
/// node answers with JobReleased.
struct TerminateCommand {
  JobId job = 0;
  NodeId node = 0;
};
using Command = std::variant<LaunchCommand, SignalCommand, TerminateCommand>;

/// What one call decided: commands for agents, and what changed (for
/// watchers, logs and persistence).
struct Effects {
  std::vector<Command> commands;
  std::vector<JobId> changed_jobs;
  std::vector<NodeId> changed_nodes;
  /// Finished jobs past their retention, which the engine no longer knows:
  /// what the caller keeps of them can go too.
  std::vector<JobId> forgotten_jobs;
};

/// A job with ranks still alive on a registering node.
struct RunningReport {
  JobId job = 0;
  int attempt = 0;   ///< 0: not said (any attempt)
  int ranks_ok = 0;  ///< ranks there that already exited 0
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
  std::string launch_error;  ///< non-empty: the launch itself failed
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

/// What an operator set on a node, which outlives a controller restart.
struct NodeAdmin {
  bool drain = false;
  std::string reason;
};

/// What a store keeps of an engine: every job not yet finished (and any
/// finished ones it wants shown again), the next id, and operators' node
/// settings by name.
struct SavedState {
  std::vector<Job> jobs;  ///< placement grants and released flags as they were
  JobId next_id = 1;
  std::vector<std::pair<NodeId, NodeAdmin>> nodes;
  std::vector<policy::UsageRecord> usage;  ///< fair-share usage
};

/// A job as users name it: `12` (a job, or every task of array 12) or
/// `12_3` (task 3 of array 12, created or not).
struct JobRef {
  JobId job = 0;
  int task = -1;  ///< -1: the whole job
};

/// `cohort why`: what keeps a job from starting, in words.
struct Explanation {
  std::string summary;
  std::vector<std::string> blockers;
  std::vector<std::string> suggestions;
  Millis expected_start{0};  ///< 0: unknown
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
  std::vector<JobId> jobs;
};

/// Identity of a caller, as the shell established it.
struct Caller {
  std::uint32_t uid = 0;
  [[nodiscard]] bool IsOperator() const { return uid == 0; }
};

/// Owns every job and node of one cluster. Single-threaded: the controller
/// calls it only from its state thread. Deterministic: same calls, same
/// `now`, same decisions.
class Engine {
 public:
  /// The topology must outlive the engine.
  Engine(const config::ClusterConfig& config, const topology::Topology& topology,
         alloc::NodePool pool);

  /// Loads what a previous engine left, before any other call. Pending jobs
  /// are resolved again against today's configuration; one that no longer
  /// fits it fails with the reason. Running and stopping jobs take their
  /// grants back; their nodes get NodeTimeout from `now` to register and
  /// report, else they are lost. Jobs it changes are in `effects`.
  void Restore(SavedState state, Millis now, Effects& effects);

  /// Validates and queues a job. InvalidArgument names the field and the
  /// fix; FailedPrecondition says why the job can never run here.
  [[nodiscard]] absl::StatusOr<JobId> Submit(JobRequest request, Millis now, Effects& effects);

  struct Preview {
    std::string would_run_on;  ///< hostlist, empty when it would wait
    std::string reason;
  };
  /// Validates like Submit and says where the job would run now.
  [[nodiscard]] absl::StatusOr<Preview> TestSubmit(const JobRequest& request);

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

  /// `cohort hold`: pending jobs stop being eligible. An operator's hold
  /// (JobHeldAdmin) only an operator releases.
  [[nodiscard]] absl::Status Hold(JobRef ref, const Caller& caller, Effects& effects);
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

  /// The multifactor priority of a job at `now`.
  [[nodiscard]] policy::PriorityFactors PriorityOf(const Job& job, Millis now) const;
  /// Fair-share usage (charged up to the last Tick or pass).
  [[nodiscard]] const policy::FairShare& Usage() const { return fair_share_; }
  /// `cohort why`.
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

  /// Operator actions. PermissionDenied for non-operators; InvalidArgument
  /// for a drain without a reason.
  [[nodiscard]] absl::Status Drain(NodeId node, const std::string& reason, const Caller& caller,
                                   Effects& effects);
  [[nodiscard]] absl::Status Resume(NodeId node, const Caller& caller, Effects& effects);

  /// Time passes: nodes silent for NodeTimeout go DOWN, running jobs near
  /// their limit get their TimeWarning (once per attempt), jobs past it are
  /// stopped, --switches waits expire; while jobs wait, the queue is
  /// ordered afresh (a full pass) every 30 s.
  void Tick(Millis now, Effects& effects);
  /// One scheduling pass: suspended jobs resume where they fit; pending
  /// jobs, highest partition tier first, then by multifactor priority, start
  /// where they fit; the first `BackfillDepth` that cannot get a
  /// reservation at the earliest time running jobs' limits allow; lower jobs
  /// start only where they delay no reservation (backfill); a job of a
  /// higher tier or preempting QOS that cannot start chooses victims.
  void Schedule(Millis now, Effects& effects);
  /// True when something happened that may let a pending job start.
  [[nodiscard]] bool ScheduleNeeded() const { return schedule_needed_; }
  /// Which kind of pass the last Schedule ran (docs/scheduling.md): only the
  /// new jobs ("submission"), the ordered part of the queue after releases
  /// ("release"), or all of it ("full"; "release-full" when a release pass
  /// reached the part of the queue the last full pass left unordered); or
  /// none ("idle") after releases that freed nothing one node of a waiting
  /// job could use.
  [[nodiscard]] std::string_view LastPassKind() const { return last_pass_kind_; }

  [[nodiscard]] const Job* FindJob(JobId id) const;
  /// Every job the engine holds, by id.
  [[nodiscard]] const std::map<JobId, Job>& Jobs() const { return jobs_; }
  /// 1-based place of a pending job in the order passes try jobs; 0 if not
  /// pending. Sorts the queue: for many jobs, use PendingOrder() once.
  [[nodiscard]] int QueuePosition(JobId id) const;
  /// Pending jobs (an array's untouched tasks count once).
  [[nodiscard]] std::size_t PendingCount() const;
  /// The pending jobs in the order passes try them.
  [[nodiscard]] std::vector<JobId> PendingOrder() const;
  [[nodiscard]] NodeView ViewNode(NodeId node) const;
  [[nodiscard]] NodeAdmin Admin(NodeId node) const;
  /// The id the next submission gets.
  [[nodiscard]] JobId NextId() const { return next_id_; }
  [[nodiscard]] const alloc::NodePool& Pool() const { return pool_; }
  [[nodiscard]] const topology::Topology& GetTopology() const { return topology_; }
  [[nodiscard]] const config::ClusterConfig& Config() const { return config_; }

  /// Checks the invariants: nothing allocated twice, every running gang
  /// whole, pending jobs hold nothing. Returns Internal naming the first
  /// broken one. For tests and debug builds.
  [[nodiscard]] absl::Status CheckInvariants() const;

 private:
  struct NodeRuntime {
    bool registered = false;
    bool awaited = false;  ///< restored with jobs: must register within NodeTimeout
    bool down = false;
    bool drain = false;
    std::string drain_reason;  ///< kept while the node is down, shown again after
    std::string down_reason;
    Millis last_heartbeat{0};
    std::set<JobId> jobs;
  };

  absl::StatusOr<Job> Resolve(JobRequest request) const;
  void Apply(Job& job, JobEvent event, Millis now, Effects& effects);
  void StopGang(Job& job, Effects& effects);
  void ReleaseNode(Job& job, int node_rank, Effects& effects);
  void Finish(Job& job, Millis now, Effects& effects);
  void NodeLost(NodeId node, const std::string& reason, Millis now, Effects& effects);
  void UpdateCondition(NodeId node);
  void Changed(Job& job, Effects& effects);
  int NodeRankOf(const Job& job, NodeId node) const;
  int MasterPort(const Job& job) const;
  void ApplyFinished(Job& job, NodeId node, int node_rank, const FinishedReport& report, Millis now,
                     Effects& effects);
  void CountOk(Job& job, int node_rank, int ranks_ok, Millis now, Effects& effects);
  void Warn(Job& job, Effects& effects);
  // The indexes below follow every job's state: a job changes state only
  // through SetState, and enters or leaves jobs_ with Index / Unindex.
  void SetState(Job& job, JobState next);
  void Index(Job& job);
  void Unindex(Job& job);

  // Policy (engine_policy.cpp).
  struct Reservation {
    JobId job = 0;
    Millis start{0};
    std::vector<NodeId> nodes;
  };
  struct PassState;
  /// A pending job's place in the order passes try them: highest partition
  /// tier first, then highest priority, then oldest id. Sorted by value, so
  /// that sorting a long queue does not chase a pointer per comparison.
  struct QueueKey {
    int tier = 0;
    alloc::PartitionId partition = -1;  ///< -1: none; not part of the order
    std::int64_t priority = 0;
    JobId id = 0;
    Job* job = nullptr;
    static QueueKey Of(Job& job) {
      return {job.priority_tier, job.gang.partition.value_or(-1), job.priority, job.id, &job};
    }
    bool operator<(const QueueKey& o) const {
      if (tier != o.tier) return tier > o.tier;
      if (priority != o.priority) return priority > o.priority;
      return id < o.id;
    }
  };
  /// Whatever set schedule_needed_ other than a submission or a release:
  /// the next pass must go over the whole queue.
  void NeedPass();
  /// `job` gave back a node: what waits may fit now.
  void NeedReleasePass(const Job& job);
  void NoteDependencies(const Job& job);
  [[nodiscard]] bool IsDependencyTarget(const Job& job) const;
  /// A pass after nothing but submissions, each behind a waiting job of its
  /// partition: only the new jobs are tried, as backfill against the last
  /// full pass's reservations. False (nothing done) when a full pass is due.
  /// With `past_releases`, releases happened too but none of the jobs that
  /// waited before the new ones can use them (ReleaseCannotMatter): their
  /// fate is unchanged, and the new jobs are placed on what is free now.
  bool SubmissionPass(Millis now, Effects& effects, bool past_releases);
  /// A pass after releases (and submissions) only: the part of the queue
  /// the last full pass ordered, with the new jobs merged in, tried as a
  /// full pass would until the queue settles. False (nothing done) when a
  /// full pass is due; it runs one itself if it reaches the unordered part.
  bool ReleasePass(Millis now, Effects& effects);
  /// True when releases happened since the last pass, no suspended job or
  /// preemptor waits on them, no running-job limit (QOS limits, array
  /// throttles) counts them, and no node they freed could take one node of
  /// any job that was pending before the submissions since the last pass
  /// (by shape, whatever else holds it): nothing of theirs can start, and
  /// the reservations made stay promises kept (they can only be later than
  /// a new pass would plan). The new jobs are the submission pass's.
  [[nodiscard]] bool ReleaseCannotMatter() const;
  /// What every pass, and a pass skipped by ReleaseCannotMatter, clears of
  /// the releases since the last one.
  void ForgetReleases();
  void FullPass(Millis now, Effects& effects);
  /// What every pass does first: usage, resumptions, the running totals.
  void BeginPass(PassState& pass, Millis now, Effects& effects);
  /// Computes the job's multifactor priority; `shares` caches fair share
  /// per (account, user) slot (-1: not yet).
  void Prioritize(Job& job, std::vector<double>& shares, Millis now);
  [[nodiscard]] policy::PriorityFactors PriorityWith(const Job& job, double fairshare,
                                                     Millis now) const;
  /// Tries one pending job of the pass: starts it, or says why it waits
  /// (with a reservation or preemption when it is its partition's first).
  void Take(const QueueKey& key, PassState& pass, Millis now, Effects& effects);
  /// Take, keeping the pass's count of keys left (PassState::open).
  void TakeInOrder(const QueueKey& key, PassState& pass, Millis now, Effects& effects);
  void Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects);
  Job& SplitTask(Job& array, Millis now, Effects& effects);
  void ChargeUsage(Millis now);
  void ChargeUsage(Job& job, Millis now);
  void ResumeSuspended(Millis now, Effects& effects);
  /// Whether the job may be considered now; sets its reason when not.
  bool Eligible(Job& job, PassState& pass, Millis now, Effects& effects);
  /// 1: satisfied, 0: waiting, -1: can never be satisfied; `why` says which term.
  int DependencyStatus(Job& job, std::string& why);
  std::string LimitReached(const Job& job, const PassState& pass) const;
  std::optional<Reservation> PlanReservation(const Job& job, PassState& pass, Millis now);
  static std::vector<NodeId> ReservedNodes(const std::vector<Reservation>& reservations,
                                           Millis start, const Job& job);
  bool TryPreempt(Job& job, Millis now, Effects& effects);
  void StopVictim(Job& victim, const std::string& detail, Millis now, Effects& effects);
  config::PreemptMode VictimMode(const Job& job) const;
  std::chrono::seconds GraceOf(const Job& job) const;
  int PreemptSignalOf(const Job& job) const;
  bool MayPreempt(const Job& preemptor, const Job& victim, Millis now) const;
  void SetReason(Job& job, std::string_view reason, std::string_view detail, Effects& effects);
  absl::Status CheckOwner(const Job& job, const Caller& caller, std::string_view verb) const;

  config::ClusterConfig config_;
  const topology::Topology& topology_;
  alloc::NodePool pool_;
  alloc::GangAllocator allocator_;
  std::map<JobId, Job> jobs_;
  std::vector<NodeRuntime> nodes_;
  JobId next_id_ = 1;
  bool schedule_needed_ = false;
  policy::FairShare fair_share_;
  int max_tier_ = 0;
  int max_qos_priority_ = 0;
  /// Preemptors whose victims are stopping: the nodes each will take.
  std::map<JobId, std::vector<NodeId>> preempt_plans_;
  /// Arrays: the ids of each array's created tasks (the record not included).
  std::map<JobId, std::vector<JobId>> array_tasks_;

  /// Jobs by state, so that ticks and passes cost what is pending or running,
  /// not everything still in memory. Pointers into jobs_ (std::map nodes do
  /// not move), ordered by id.
  struct ById {
    using is_transparent = void;  ///< finds by const Job* too
    bool operator()(const Job* a, const Job* b) const { return a->id < b->id; }
  };
  absl::btree_set<Job*, ById> pending_;
  absl::btree_set<Job*, ById> active_;  ///< running or completing (suspended too)
  /// Pending jobs whose --switches=N@wait is still counting.
  absl::btree_set<Job*, ById> switch_waits_;
  /// Finished jobs by end time, for forgetting them after kFinishedRetention.
  std::set<std::pair<Millis, JobId>> finished_;
  /// (account, user) pairs by Job::share_slot, so that a pass computes each
  /// pair's fair-share factor once and finds it without a string compare.
  std::map<std::pair<std::string, std::string>, int> share_slots_;
  std::vector<std::pair<std::string, std::string>> share_owners_;

  /// What the last full pass left for submission passes: its reservations,
  /// the first waiting job of each partition, when it ran; and the jobs
  /// submitted since.
  bool full_pass_needed_ = true;
  /// Priorities drift with age and usage: while jobs wait, Tick asks for a
  /// full pass at least this often (on the clock, so that no submission
  /// waits for it).
  static constexpr Millis kFullPassEvery = std::chrono::seconds(30);
  Millis last_full_pass_{0};
  std::vector<Reservation> last_reservations_;
  std::map<alloc::PartitionId, QueueKey> last_blocked_;
  std::vector<JobId> submitted_;
  bool released_ = false;  ///< a node was given back since the last pass
  /// The nodes given back since the last pass, and how many pending jobs
  /// have each gang shape: a release that frees nothing one node of any
  /// waiting shape could take needs no pass (ReleaseCannotMatter).
  std::vector<NodeId> released_nodes_;
  /// An array task gave back a node: a throttled array (%N) may start its
  /// next task anywhere, not only where this one ran.
  bool released_array_task_ = false;
  std::map<GangShape, int> pending_shapes_;
  std::string_view last_pass_kind_ = "none";
  /// The jobs that pending jobs' dependencies name, and whether one waits
  /// as a singleton: their start or end needs a full pass, since the jobs
  /// that wait for them may lie where a release pass does not look. Each
  /// full pass rebuilds them; submissions add to them.
  std::set<JobId> dependency_targets_;
  bool singleton_waits_ = false;
  /// The queue as the last passes ordered it (keys without job pointers),
  /// whether that covers every pending job, and the partitions of those
  /// it does not cover.
  std::vector<QueueKey> last_order_;
  bool last_order_complete_ = false;
  std::set<alloc::PartitionId> last_unordered_;
};

}  // namespace cohort
