// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "cohort/policy/fair_share.h"
#include "cohort/policy/priority.h"

/// The seams of the scheduler: narrow interfaces behind which policies plug
/// in, registered by name in plugins/builtin.cpp and chosen in cohort.conf
/// (config::PluginChoice). Every interface works on a batch (the candidate
/// nodes of one placement attempt, the fitting nodes of one group, the groups
/// of one gang), so a policy costs one virtual call per batch, never one per
/// node. Plugins keep no state between calls: what one call needs comes in
/// its context argument, so one instance may serve every thread.
namespace cohort::plugin {

using topology::GroupId;
using topology::NodeId;
using topology::SwitchId;

/// One ordering of pending jobs (a pass's queue, or the jobs submitted
/// since), as queue-order policies see it. Valid for one call.
struct QueueContext {
  const config::ClusterConfig& config;
  const policy::FairShare& usage;  ///< charged up to `now`
  const policy::PriorityScale& scale;
  Millis now{0};
  /// Fair-share factor by Job::cache.share_slot, kept for the whole ordering
  /// (-1: not computed yet), and the (account, user) of each slot.
  std::span<double> shares;
  std::span<const std::pair<std::string, std::string>> share_owners;
};

/// Queue order (PriorityType=): which pending job is tried first. Passes try
/// jobs by partition tier (highest first), then by the priority this sets
/// (highest first), then by id (oldest first).
class QueueOrder {
 public:
  virtual ~QueueOrder() = default;
  [[nodiscard]] virtual std::string_view Name() const = 0;
  /// Sets `priority` of every job of `jobs` (pending, each with its
  /// share_slot). Deterministic for the same jobs, usage and `now`.
  virtual void Rank(const QueueContext& context, std::span<Job* const> jobs) const = 0;
};

/// What a pass has counted of the jobs running under each QOS: jobs and GPUs
/// per (QOS, uid), GPUs per (QOS, account). Counted only when some chosen
/// admission check may make jobs wait (AdmissionCheck::MayMakeJobsWait);
/// a job that starts in the pass is counted at once.
struct RunningTotals {
  std::map<std::pair<std::string, std::uint32_t>, int> jobs_per_user;  ///< (qos, uid)
  std::map<std::pair<std::string, std::uint32_t>, int> gpus_per_user;
  std::map<std::pair<std::string, std::string>, int> gpus_per_account;  ///< (qos, account)

  /// A job starts (+1), ends (-1), or is counted as running at the start of
  /// the pass (+1).
  void Count(const Job& job, int sign) {
    const int gpus = GpusAsked(job);
    jobs_per_user[{job.qos, job.request.uid}] += sign;
    gpus_per_user[{job.qos, job.request.uid}] += sign * gpus;
    gpus_per_account[{job.qos, job.request.account}] += sign * gpus;
  }
};

/// One admission decision, as admission checks see it. Valid for one call.
struct AdmissionContext {
  const config::ClusterConfig& config;
  /// The pass's totals; empty at submission, which counts nothing.
  const RunningTotals& running;
  Millis now{0};
};

/// Why a job may not be tried now: the pending reason the engine records and
/// the detail the CLI shows beside it.
struct Wait {
  PendingReason reason = PendingReason::kNone;
  std::string detail;
};

/// Admission (AdmissionPlugins=): whether a job may be queued, and whether
/// a pass may try it now. Checks run in the configured order; the first
/// refusal or wait decides. What stays the engine's own (src/engine/admission.cpp),
/// because it follows from the job's state rather than from a policy: holds,
/// dependencies and array throttles (%N), which a pass applies before the
/// checks; the partition's and QOS' bounds a job can never fit (MaxTime,
/// MaxWall, MaxNodes, AllowAccounts, a GPU count over a QOS limit), which
/// are applied again when a configuration change meets a queued job; and
/// MaxSubmitJobsPerUser, which counts the queue.
class AdmissionCheck {
 public:
  virtual ~AdmissionCheck() = default;
  /// The name the registry knows it by, e.g. "admission/limits".
  [[nodiscard]] virtual std::string_view Name() const = 0;
  /// At submission (and --test-only), after the engine resolved the job
  /// against the configuration: OkStatus, or why the job is refused, with
  /// the fix in the message (InvalidArgument: the request lacks something;
  /// FailedPrecondition: it can never be queued here; PermissionDenied: not
  /// for this user).
  [[nodiscard]] virtual absl::Status CheckSubmit(const AdmissionContext& context,
                                                 const Job& job) const = 0;
  /// Whether Admit can ever return a wait under `config`. The engine asks
  /// once per engine; when no chosen check may wait, passes count no totals,
  /// call no Admit and keep their fast paths.
  [[nodiscard]] virtual bool MayMakeJobsWait(const config::ClusterConfig& config) const = 0;
  /// In a pass, for a pending job with no hold, its dependencies met and its
  /// array under its throttle: none when it may be tried now, else why it
  /// waits. Called only when MayMakeJobsWait(config).
  [[nodiscard]] virtual std::optional<Wait> Admit(const AdmissionContext& context,
                                                  const Job& job) const = 0;
};

/// What each node of a gang needs, resolved from its request.
struct NodeNeed {
  int cpus = 0;
  std::int64_t memory_mb = 0;
  int gpus = 0;
  std::uint64_t features = 0;  ///< the pool's feature bits the node must have
  alloc::Exclusivity exclusivity = alloc::Exclusivity::kShared;
  int segment = 1;  ///< nodes per segment (--segment); 1 without one

  /// Whether a node of this capacity could ever host one node of the gang.
  [[nodiscard]] bool Fits(const alloc::NodeCapacity& c) const {
    return c.cpus >= cpus && c.memory_mb >= memory_mb && c.gpus >= gpus &&
           (c.features & features) == features;
  }
};

/// Which state a placement attempt looks at: the pool as it is now, or the
/// pool with every node up and idle (could the gang ever run?).
enum class View : std::uint8_t { kNow, kIdleCluster };

/// One placement attempt, as node filters see it. Valid for one call.
struct FilterContext {
  const alloc::GangRequest& request;
  const NodeNeed& need;
  const alloc::NodePool& pool;
  const topology::Topology& topology;
  View view;
  std::span<const std::uint8_t> excluded;  ///< by node: 1 for the request's excluded nodes
};

/// Why the nodes a filter dropped were dropped, summed over the filters of
/// one attempt; the allocator's pending reasons quote these counts.
struct FilterTally {
  int excluded = 0;    ///< named by --exclude
  int ineligible = 0;  ///< too small or without a feature, even when idle
  int down = 0;
  int drained = 0;
  int busy = 0;       ///< not enough free now, or not idle for --exclusive
  int ruled_out = 0;  ///< dropped by a policy filter (not filter/resources)
};

/// Node filter (NodeFilterPlugins=): which nodes may host one node of the
/// gang. Filters run in the configured order, each over the nodes the one
/// before kept; filter/resources comes first.
class NodeFilter {
 public:
  virtual ~NodeFilter() = default;
  /// The name the registry knows it by, e.g. "filter/resources".
  [[nodiscard]] virtual std::string_view Name() const = 0;
  /// Appends to `kept`, in their order, the nodes of `nodes` that may host
  /// one node of the gang, and counts each node it drops in `tally`.
  /// `nodes` may repeat a node; each occurrence is judged on its own.
  virtual void Filter(const FilterContext& context, std::span<const NodeId> nodes,
                      std::vector<NodeId>& kept, FilterTally& tally) const = 0;
};

/// The fitting nodes of one group, as node scores see them.
struct ScoreContext {
  const NodeNeed& need;
  const alloc::NodePool& pool;
  int take = 0;  ///< how many of the nodes the gang takes: the first `take` after ordering
};

/// Node score (NodeScoreType=): which of the fitting nodes of a group the
/// gang takes when the group has more than it needs.
class NodeScore {
 public:
  virtual ~NodeScore() = default;
  [[nodiscard]] virtual std::string_view Name() const = 0;
  /// Orders `nodes` (fitting, not required, ascending id; more than
  /// `context.take`) best first. Must be deterministic: break ties by id.
  virtual void Order(const ScoreContext& context, std::span<NodeId> nodes) const = 0;
};

/// The whole gang's view of the topology, as domain scores see it: how many
/// usable nodes each group offers now (whole segments only) and which groups
/// the required nodes pin.
struct DomainContext {
  const alloc::GangRequest& request;
  const topology::Topology& topology;
  int wanted = 0;                            ///< nodes of the gang
  std::span<const int> group_cap;            ///< by group: usable nodes
  std::span<const int> group_required;       ///< by group: required nodes in it
  std::span<const GroupId> forced;           ///< groups holding required nodes, ascending
  SwitchId required_home = topology::kNone;  ///< lowest switch above them; kNone: none
};

/// Domain score (DomainScoreType=): which switch or block domain, and which
/// groups in it, hold the whole gang.
class DomainScore {
 public:
  virtual ~DomainScore() = default;
  [[nodiscard]] virtual std::string_view Name() const = 0;
  /// Appends to the empty `chosen` the groups the gang spans: every forced
  /// group, then others whose capacities add up to `wanted`, all under one
  /// switch. With --switches=N on a topology without blocks, at most N
  /// groups. Returns false, with `chosen` left empty, when no switch holds
  /// the gang; the allocator explains why.
  [[nodiscard]] virtual bool Choose(const DomainContext& context,
                                    std::vector<GroupId>& chosen) const = 0;
};

/// The policies the gang allocator consults; never null once made by
/// MakePlugins.
struct AllocatorPlugins {
  std::vector<std::shared_ptr<const NodeFilter>> node_filters;  ///< in order, resources first
  std::shared_ptr<const NodeScore> node_score;
  std::shared_ptr<const DomainScore> domain_score;
};

/// One instance of each chosen policy. Stateless, so shared between the
/// allocators of several threads.
struct PluginSet {
  AllocatorPlugins allocator;
  std::shared_ptr<const QueueOrder> queue_order;
  std::vector<std::shared_ptr<const AdmissionCheck>> admission;  ///< in the configured order
};

/// Builds the policies `choice` names from the list in plugins/builtin.cpp.
/// Returns InvalidArgument naming the config key and the known names for an
/// unknown name, for a node-filter list without filter/resources first, and
/// for a node-filter or admission list with a name twice.
[[nodiscard]] absl::StatusOr<PluginSet> MakePlugins(const config::PluginChoice& choice);

/// The built-in defaults (filter/resources, score/locality, domain/tightest),
/// made once and shared; what GangAllocator(topology) uses.
[[nodiscard]] std::shared_ptr<const AllocatorPlugins> DefaultAllocatorPlugins();

}  // namespace cohort::plugin
