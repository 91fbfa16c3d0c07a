// SPDX-License-Identifier: Apache-2.0
#include "store/wire.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "cohort/alloc/placement_check.h"
#include "cohort/container/container_options.h"
#include "cohort/container/image_ref.h"
#include "cohort/launch/binding.h"

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"

namespace cohort::controller {

absl::StatusOr<JobRef> ParseJobRef(std::string_view text) {
  JobRef ref;
  const std::size_t bar = text.find('_');
  const std::string_view job = text.substr(0, bar);
  auto number = [](std::string_view digits, auto& out) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size() && !digits.empty();
  };
  if (!number(job, ref.job) || ref.job <= 0 ||
      (bar != std::string_view::npos &&
       (!number(text.substr(bar + 1), ref.task) || ref.task < 0))) {
    return absl::InvalidArgumentError(fmt::format(
        "job \"{}\": give a job id (12) or an array task (12_3); see cohort queue", text));
  }
  return ref;
}

absl::Status HiddenJob(std::int64_t job) {
  return absl::PermissionDeniedError(
      fmt::format("job {} is another user's, and PrivateData=jobs shows a job only to its owner, "
                  "root and Operators=",
                  job));
}

absl::Status RequireTrusted(const Identity& who, std::string_view action) {
  if (who.trust != Identity::Trust::kAnonymous) return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "{} needs an identity, and this call has none ({}): over TCP the cohort command attaches a "
      "MUNGE credential when munged runs on this host (AuthType=munge, AuthInfo=socket= in "
      "cohort.conf); on the controller's host the local Unix socket needs none",
      action, who.anonymous_why.empty() ? "no credential" : who.anonymous_why));
}

absl::Status CheckContainer(const v1::ContainerSpec& c) {
  // Options without an image or a name shape the container of the steps
  // that give one (sbatch --container-mounts, srun --container-image).
  if (!c.image().empty()) {
    if (absl::StatusOr<container::ImageSource> image = container::ParseImageReference(c.image());
        !image.ok()) {
      return image.status();
    }
  }
  if (!c.mounts().empty()) {
    if (absl::StatusOr<std::vector<container::Mount>> mounts = container::ParseMounts(c.mounts());
        !mounts.ok()) {
      return mounts.status();
    }
  }
  if (!c.workdir().empty()) {
    if (absl::Status workdir = container::CheckWorkdir(c.workdir()); !workdir.ok()) return workdir;
  }
  if (!c.name().empty()) {
    if (absl::StatusOr<container::ContainerName> name = container::ParseContainerName(c.name());
        !name.ok()) {
      return name.status();
    }
  }
  if (!c.env().empty()) {
    if (absl::StatusOr<std::vector<std::string>> env = container::ParseEnvNames(c.env());
        !env.ok()) {
      return env.status();
    }
  }
  if (!c.save().empty()) {
    if (absl::Status save = container::CheckSavePath(c.save()); !save.ok()) return save;
  }
  return absl::OkStatus();
}

absl::Status ContainersAllowed(const config::ClusterConfig& config,
                               const v1::ContainerSpec& container) {
  if (config.container_runtime != "none" ||
      (container.image().empty() && container.name().empty())) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "this cluster runs no containers (ContainerRuntime=none in its cohort.conf); run without "
      "--container-image and --container-name, or ask its operators");
}

absl::StatusOr<JobRequest> RequestFromSpec(const v1::JobSpec& spec, const Identity& who,
                                           int max_array_size) {
  auto invalid = [](const std::string& message) { return absl::InvalidArgumentError(message); };
  if (absl::Status container = CheckContainer(spec.container()); !container.ok()) return container;
  if (spec.argv().empty() && spec.script().empty() && !spec.allocation_only()) {
    return invalid("argv: nothing to run; give a script or -- COMMAND");
  }
  if (spec.nodes() < 1)
    return invalid(fmt::format("nodes is {}; ask for at least 1 node (-N 1)", spec.nodes()));
  if (spec.tasks_per_node() < 0 || spec.cpus_per_task() < 0 || spec.gpus_per_node() < 0) {
    return invalid("counts must not be negative (ntasks-per-node, cpus-per-task, gpus-per-node)");
  }
  // Before anything sized by them (a binding plan has a slot per rank).
  for (const auto& [value, most, option] :
       {std::tuple{spec.nodes(), kMaxJobNodes, "nodes (-N)"},
        std::tuple{spec.tasks_per_node(), kMaxTasksPerNode, "ntasks-per-node"},
        std::tuple{spec.cpus_per_task(), kMaxCpusPerTask, "cpus-per-task (-c)"},
        std::tuple{spec.gpus_per_node(), kMaxGpusPerNode, "gpus-per-node"}}) {
    if (value > most) {
      return invalid(fmt::format("{} is {}; at most {} is taken", option, value, most));
    }
  }
  if (!spec.open_mode().empty() && spec.open_mode() != "append" && spec.open_mode() != "truncate") {
    return invalid(fmt::format("open_mode is \"{}\"; give append or truncate (--open-mode)",
                               spec.open_mode()));
  }
  if (spec.memory_mb() < 0) return invalid("mem must not be negative");
  if (spec.time_limit_s() < 0) return invalid("time must not be negative");
  if (spec.warn_signal() < -1 || spec.warn_signal() > 64) {
    return invalid(
        fmt::format("signal: {} is not a signal number; give 1-64, 0 for SIGUSR1 or -1 "
                    "for no warning (--signal=USR1@90)",
                    spec.warn_signal()));
  }
  if (spec.warn_seconds() < 0 || spec.warn_seconds() > kMaxWarningLead.count()) {
    return invalid(fmt::format("signal: the warning {} s before the time limit is outside 0-{} s",
                               spec.warn_seconds(), kMaxWarningLead.count()));
  }
  JobRequest r;
  r.launch = spec.allocation_only()  ? JobLaunch::kAllocation
             : spec.script().empty() ? JobLaunch::kEveryRank
                                     : JobLaunch::kBatchScript;
  r.name = spec.name().empty() ? "job" : spec.name();
  r.partition = spec.partition();
  r.account = spec.account();
  r.user_name = who.user_name;
  r.uid = who.uid;
  r.nodes = spec.nodes();
  r.tasks_per_node = spec.tasks_per_node() == 0 ? 1 : spec.tasks_per_node();
  r.cpus_per_task = spec.cpus_per_task() == 0 ? 1 : spec.cpus_per_task();
  r.overcommit = spec.overcommit();
  r.gpus_per_node = spec.gpus_per_node();
  r.memory_mb = spec.memory_mb();
  r.time_limit = std::chrono::seconds(spec.time_limit_s());
  r.exclusivity = spec.exclusive_topo() ? alloc::Exclusivity::kTopo
                  : spec.exclusive()    ? alloc::Exclusivity::kExclusive
                                        : alloc::Exclusivity::kShared;
  r.switches = spec.switches();
  r.switches_wait = std::chrono::seconds(spec.switches_wait_s());
  r.segment = spec.segment();
  r.spread_segments = spec.spread_segments();
  r.requeue = spec.requeue();
  if (spec.has_max_restarts()) {
    if (spec.max_restarts() < 0 || spec.max_restarts() > config::ClusterConfig::kMaxRestarts) {
      return invalid(fmt::format("max_restarts: {} is not 0-{}; give --max-restarts=N",
                                 spec.max_restarts(), config::ClusterConfig::kMaxRestarts));
    }
    r.max_restarts = spec.max_restarts();
  }
  if (spec.no_kill() && r.launch == JobLaunch::kEveryRank) {
    return invalid(
        "no_kill: --no-kill keeps a batch job or an allocation going without a lost node, for "
        "its next steps; a command run as every rank ends with its node (submit a batch script)");
  }
  r.no_kill = spec.no_kill();
  if (spec.spares() < 0 || spec.spares() > spec.nodes()) {
    return invalid(
        fmt::format("spares: {} is not 0-{} (at most one spare per node of the job); "
                    "give --spares=N",
                    spec.spares(), std::max(spec.nodes(), 0)));
  }
  r.spares = spec.spares();
  r.reservation = spec.reservation();
  if (!spec.restart_policy().empty()) {
    const std::optional<RestartPolicy> policy = ParseRestartPolicy(spec.restart_policy());
    if (!policy) {
      return invalid(
          "restart_policy: neither job nor step; give --restart-policy=job or "
          "--restart-policy=step");
    }
    r.restart_policy = *policy;
  }
  // --signal: 0 in a field is its default (SIGUSR1, 90 s), -1 no warning.
  if (spec.warn_signal() != -1) {
    r.warning.signal = spec.warn_signal() == 0 ? kDefaultWarningSignal : spec.warn_signal();
    r.warning.before =
        spec.warn_seconds() == 0 ? kDefaultWarningLead : std::chrono::seconds(spec.warn_seconds());
    r.warning.batch_only = spec.warn_batch_only();
  }
  r.qos = spec.qos();
  r.hold = spec.hold();
  r.kill_on_invalid_dep = spec.kill_on_invalid_dep();
  if (!spec.array().empty()) {
    absl::StatusOr<ArraySpec> array = ParseArraySpec(spec.array(), max_array_size);
    if (!array.ok()) return array.status();
    r.array = *std::move(array);
  }
  if (!spec.dependency().empty()) {
    absl::StatusOr<Dependency> dependency = ParseDependency(spec.dependency());
    if (!dependency.ok()) return dependency.status();
    r.dependency = *std::move(dependency);
  }
  r.features.assign(spec.features().begin(), spec.features().end());
  // Seconds since the epoch, before the year 3000 (so that milliseconds fit).
  constexpr std::int64_t kYear3000 = 32503680000;
  if (spec.begin_time_s() < 0 || spec.deadline_s() < 0 || spec.begin_time_s() >= kYear3000 ||
      spec.deadline_s() >= kYear3000) {
    return invalid(
        "begin and deadline are seconds since the epoch, from 0 to before the year 3000 "
        "(--begin, --deadline)");
  }
  r.begin = std::chrono::seconds(spec.begin_time_s());
  r.deadline = std::chrono::seconds(spec.deadline_s());
  r.gpu_type = spec.gpu_type();
  for (auto [list, out, option] : {std::tuple{&spec.nodelist(), &r.nodelist, "nodelist"},
                                   std::tuple{&spec.exclude(), &r.exclude, "exclude"}}) {
    if (list->empty()) continue;
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(*list, kMaxJobNodes);
    if (!names.ok()) return invalid(fmt::format("{}: {}", option, names.status()));
    *out = *std::move(names);
  }
  return r;
}

NodeKinds::NodeKinds(const config::ClusterConfig& config) {
  std::unordered_map<std::string_view, const config::NodeSpec*> by_name;
  by_name.reserve(config.nodes.size());
  for (const config::NodeSpec& node : config.nodes) by_name.emplace(node.name, &node);
  for (const config::PartitionSpec& partition : config.partitions) {
    std::vector<Kind>& kinds = by_partition_[partition.name];
    std::set<std::tuple<int, std::int64_t, int, std::vector<int>>> seen;
    for (const std::string& name : partition.nodes) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      const config::NodeSpec& node = *it->second;
      if (!seen.emplace(node.cpus, node.memory_mb, node.gpus, node.gpu_numa).second) continue;
      kinds.push_back(
          {node.name, node.gpus,
           layout::ApproximateLayout(node.cpus, node.memory_mb, node.gpus, node.gpu_numa)});
    }
  }
}

const std::vector<NodeKinds::Kind>& NodeKinds::Of(std::string_view partition) const {
  static const std::vector<Kind> kNone;
  const auto it = by_partition_.find(partition);
  return it == by_partition_.end() ? kNone : it->second;
}

absl::Status NodeKinds::Check(const Kind& kind, const binding::BindingRequest& wanted) {
  const binding::BindingOptions& o = wanted.options;
  const VerdictKey key{&kind,       wanted.gpus,         wanted.ranks, wanted.cpus_per_task,
                       o.gpu.kind,  o.gpu.ranks_per_gpu, o.cpu,        o.mem,
                       o.numbering, wanted.overcommit};
  if (const auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  // Bounded: a flood of odd shapes costs a check each, not memory.
  if (verdicts_.size() >= 4096) verdicts_.clear();
  return verdicts_.emplace(key, binding::CheckBinding(kind.layout, wanted)).first->second;
}

absl::Status CheckBindingAtSubmit(const v1::JobSpec& spec, const JobRequest& request,
                                  const config::ClusterConfig& config, NodeKinds& kinds) {
  absl::StatusOr<binding::BindingOptions> options =
      binding::ParseBindingOptions(spec.gpu_bind(), spec.cpu_bind(), spec.mem_bind());
  if (!options.ok()) return options.status();
  const config::PartitionSpec* partition = request.partition.empty()
                                               ? config.DefaultPartition()
                                               : config.FindPartition(request.partition);
  if (partition == nullptr) return absl::OkStatus();  // the engine says what is wrong
  binding::BindingRequest wanted;
  wanted.ranks = request.tasks_per_node;
  wanted.cpus_per_task = request.cpus_per_task;
  wanted.overcommit = request.overcommit;
  wanted.gpus = request.gpus_per_node >= 64 ? ~std::uint64_t{0}
                                            : (std::uint64_t{1} << request.gpus_per_node) - 1;
  wanted.options = *options;
  // One verdict per kind of node; the job needs one kind that can bind it.
  absl::Status first = absl::OkStatus();
  for (const NodeKinds::Kind& kind : kinds.Of(partition->name)) {
    if (kind.gpus < request.gpus_per_node) continue;
    absl::Status verdict = kinds.Check(kind, wanted);
    if (verdict.ok()) return verdict;
    if (first.ok()) {
      first = absl::InvalidArgumentError(fmt::format("the ranks cannot be bound on {} ({}): {}",
                                                     kind.first_node, partition->name,
                                                     verdict.message()));
    }
  }
  return first;
}

v1::JobState ToWire(JobState state) {
  switch (state) {
    case JobState::kPending:
      return v1::JOB_PENDING;
    case JobState::kRunning:
      return v1::JOB_RUNNING;
    case JobState::kCompleting:
      return v1::JOB_COMPLETING;
    case JobState::kCompleted:
      return v1::JOB_COMPLETED;
    case JobState::kFailed:
      return v1::JOB_FAILED;
    case JobState::kCancelled:
      return v1::JOB_CANCELLED;
    case JobState::kTimeout:
      return v1::JOB_TIMEOUT;
    case JobState::kNodeFail:
      return v1::JOB_NODE_FAIL;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> FromWire(v1::JobState state) {
  switch (state) {
    case v1::JOB_PENDING:
      return JobState::kPending;
    case v1::JOB_RUNNING:
      return JobState::kRunning;
    case v1::JOB_COMPLETING:
      return JobState::kCompleting;
    case v1::JOB_COMPLETED:
      return JobState::kCompleted;
    case v1::JOB_FAILED:
      return JobState::kFailed;
    case v1::JOB_CANCELLED:
      return JobState::kCancelled;
    case v1::JOB_TIMEOUT:
      return JobState::kTimeout;
    case v1::JOB_NODE_FAIL:
      return JobState::kNodeFail;
    default:
      return std::nullopt;
  }
}

v1::NodeState ToWire(NodeStatus status) {
  switch (status) {
    case NodeStatus::kUnknown:
      return v1::NODE_UNKNOWN;
    case NodeStatus::kIdle:
      return v1::NODE_IDLE;
    case NodeStatus::kMixed:
      return v1::NODE_MIXED;
    case NodeStatus::kAllocated:
      return v1::NODE_ALLOCATED;
    case NodeStatus::kDraining:
      return v1::NODE_DRAINING;
    case NodeStatus::kDrained:
      return v1::NODE_DRAINED;
    case NodeStatus::kDown:
      return v1::NODE_DOWN;
  }
  return v1::NODE_STATE_UNSPECIFIED;
}

namespace {

// The batch step's state follows its job's: it is the job's own launch.
std::string_view BatchStepState(const Job& job, JobState state) {
  switch (state) {
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kCompleted:
      return "COMPLETED";
    case JobState::kFailed:
    case JobState::kNodeFail:
      return "FAILED";
    case JobState::kCompleting:
      return job.run.cause == EndCause::kSuccess      ? "COMPLETED"
             : job.run.cause == EndCause::kRankFailed ? "FAILED"
                                                      : "CANCELLED";
    default:
      return "CANCELLED";
  }
}

// Both messages name the figures alike.
template <typename Message>
void SetUsage(const TaskUsage& usage, Message& out) {
  out.set_max_rss_kb(usage.max_rss_kb);
  out.set_total_cpu_ms(usage.cpu_ms);
  out.set_max_cpu_ms(usage.max_cpu_ms);
  if (usage.ranks > 0) {
    out.set_ave_rss_kb(usage.rss_sum_kb / usage.ranks);
    out.set_ave_cpu_ms(usage.cpu_ms / usage.ranks);
  }
  if (usage.gpu_ranks > 0) {
    v1::GpuUsage& gpu = *out.mutable_gpu();
    gpu.set_util_ave_pct(static_cast<int>(usage.gpu_util_sum / usage.gpu_ranks));
    gpu.set_util_max_pct(usage.gpu_util_max);
    gpu.set_mem_max_mb(usage.gpu_mem_max_mb);
    gpu.set_mem_ave_mb(usage.gpu_mem_sum_mb / usage.gpu_ranks);
  }
}

// One attempt's steps as clients see them: a batch job's batch step (on its
// first node), then its job steps, their nodes named by node rank.
struct AttemptSteps {
  bool batch = false;
  std::span<const std::string> nodes;  // by node rank
  std::string_view batch_state;
  Millis start{0};
  Millis end{0};  // 0: the batch step runs
  int exit_code = 0;
  int exit_signal = 0;
  std::string_view batch_reason;
  const TaskUsage* usage = nullptr;  ///< the job's own launch's
  std::span<const JobStep> steps;
};

void AttemptStepsToWire(const AttemptSteps& a,
                        google::protobuf::RepeatedPtrField<v1::JobStep>& out) {
  if (a.batch && !a.nodes.empty()) {
    v1::JobStep& batch = *out.Add();
    batch.set_step_id(-1);
    batch.set_name("batch");
    batch.set_state(std::string(a.batch_state));
    batch.set_nodes(a.nodes.front());
    batch.set_tasks(1);
    batch.set_start_time_ms(a.start.count());
    UsageToWire(*a.usage, batch);
    if (a.end.count() != 0) {
      batch.set_exit_code(a.exit_code);
      batch.set_exit_signal(a.exit_signal);
      batch.set_end_time_ms(a.end.count());
      batch.set_reason(std::string(a.batch_reason));
    }
  }
  for (const JobStep& step : a.steps) {
    v1::JobStep& s = *out.Add();
    s.set_step_id(step.id);
    s.set_name(std::to_string(step.id));
    s.set_state(std::string(StepStateName(step.state)));
    std::vector<std::string> names;
    for (const alloc::StepNode& node : step.placement.nodes) {
      if (node.node_rank >= 0 && static_cast<std::size_t>(node.node_rank) < a.nodes.size()) {
        names.push_back(a.nodes[static_cast<std::size_t>(node.node_rank)]);
      }
    }
    s.set_nodes(hostlist::Compress(names));
    s.set_tasks(step.placement.tasks);
    s.set_exit_code(step.exit_code);
    s.set_exit_signal(step.exit_signal);
    s.set_start_time_ms(step.start_time.count());
    s.set_end_time_ms(step.end_time.count());
    s.set_reason(step.reason);
    UsageToWire(step.usage, s);
  }
}

// How accounting names an attempt that ended in a requeue.
std::string_view PastStateName(EndCause cause) {
  switch (cause) {
    case EndCause::kNodeLostRequeue:
      return "NODE_FAIL";
    case EndCause::kPreemptRequeue:
      return "PREEMPTED";
    default:
      return "REQUEUED";
  }
}

}  // namespace

void UsageToWire(const TaskUsage& usage, v1::JobStep& out) { SetUsage(usage, out); }
void UsageToWire(const TaskUsage& usage, v1::Job& out) { SetUsage(usage, out); }

void StepsToWire(const Job& job, JobState state, const topology::Topology& topology, v1::Job* out) {
  if (!job.run.placement.grants.empty()) {  // not started (or requeued): no steps yet
    std::vector<std::string> nodes;
    nodes.reserve(job.run.placement.grants.size());
    for (const alloc::NodeGrant& g : job.run.placement.grants) {
      nodes.push_back(topology.NodeName(g.node));
    }
    const bool ended = state != JobState::kRunning;
    AttemptStepsToWire({.batch = IsBatch(job),
                        .nodes = nodes,
                        .batch_state = BatchStepState(job, state),
                        .start = job.run.start_time,
                        .end = ended ? job.run.end_time : Millis{0},
                        .exit_code = job.run.exit_code,
                        .exit_signal = job.run.exit_signal,
                        .batch_reason = state == JobState::kFailed ? std::string_view(job.reason)
                                                                   : std::string_view(),
                        .usage = &job.run.own_usage,
                        .steps = job.run.steps},
                       *out->mutable_steps());
  }
  for (const PastAttempt& past : job.past_attempts) {
    v1::JobAttempt& a = *out->add_past_attempts();
    a.set_attempt(past.attempt);
    a.set_state(std::string(PastStateName(past.cause)));
    a.set_start_time_ms(past.start_time.count());
    a.set_end_time_ms(past.end_time.count());
    a.set_nodes(hostlist::Compress(past.nodes));
    a.set_exit_code(past.exit_code);
    a.set_exit_signal(past.exit_signal);
    a.set_reason(past.reason);
    AttemptStepsToWire({.batch = IsBatch(job),
                        .nodes = past.nodes,
                        .batch_state = "CANCELLED",
                        .start = past.start_time,
                        .end = past.end_time,
                        .exit_code = past.exit_code,
                        .exit_signal = past.exit_signal,
                        .batch_reason = past.reason,
                        .usage = &past.own_usage,
                        .steps = past.steps},
                       *a.mutable_steps());
  }
  if (!job.run.spares.empty() && state == JobState::kRunning) {
    std::vector<std::string> spares;
    for (const alloc::NodeGrant& g : job.run.spares) spares.push_back(topology.NodeName(g.node));
    out->set_spare_nodes(hostlist::Compress(spares));
  }
  for (const RepairRecord& repair : job.repairs) {
    v1::Repair& r = *out->add_repairs();
    r.set_time_ms(repair.time.count());
    r.set_attempt(repair.attempt);
    for (const std::string& n : repair.lost) r.add_lost(n);
    for (const std::string& n : repair.replacement) r.add_replacement(n);
    for (const int rank : repair.node_ranks) r.add_node_ranks(rank);
    r.set_reason(repair.reason);
    r.set_restarted(repair.restarted);
  }
}

void PlacementToWire(const topology::Topology& topology, std::span<const alloc::NodeGrant> grants,
                     std::span<const std::string> names, int segment, v1::PlacementReport* out) {
  if (grants.empty()) return;
  const alloc::PlacementReport report = alloc::DescribePlacement(topology, grants, segment);
  out->set_segment(segment);
  for (const alloc::PlacedSegment& s : report.segments) {
    std::vector<std::string> members;
    for (const NodeId n : s.nodes) members.push_back(topology.NodeName(n));
    v1::PlacedSegment* wire = out->add_segments();
    wire->set_nodes(hostlist::CompressInOrder(members));
    wire->set_group(alloc::GroupName(topology, s.group));
  }
  for (const topology::BlockId b : report.blocks) out->add_blocks(topology.Blocks()[b].name);
  for (const topology::SwitchId s : report.leaves) {
    if (!topology.GetSwitch(s).implicit) out->add_leaves(topology.GetSwitch(s).name);
  }
  if (report.domain != topology::kNone && !topology.GetSwitch(report.domain).implicit) {
    out->set_domain(topology.GetSwitch(report.domain).name);
  }
  out->set_worst_hops(report.worst_hops);
  out->set_rank_order(hostlist::CompressInOrder(names));
  out->set_summary(alloc::FormatPlacement(topology, report));
}

void JobToWire(const Job& job, const v1::JobSpec& spec, const Engine& engine, int queue_position,
               v1::Job* out) {
  const topology::Topology& topology = engine.GetTopology();
  out->set_id(job.id);
  *out->mutable_spec() = spec;
  out->mutable_spec()->set_partition(job.request.partition);
  out->mutable_spec()->set_account(job.request.account);
  out->mutable_spec()->set_name(job.request.name);
  out->set_uid(job.request.uid);
  out->set_state(ToWire(job.state));
  out->set_reason(job.reason);
  out->set_reason_detail(job.reason_detail);
  out->set_submit_time_ms(job.submit_time.count());
  out->set_eligible_time_ms(job.wait.eligible_time.count());
  out->set_stopped(job.run.stopped && job.state == JobState::kRunning);
  out->set_start_time_ms(job.run.start_time.count());
  out->set_end_time_ms(job.run.end_time.count());
  std::vector<std::string> nodes;
  std::vector<std::string> held;  // less those a --no-kill job lost
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    nodes.push_back(topology.NodeName(job.run.placement.grants[rank].node));
    if (!Dropped(job, rank)) held.push_back(nodes.back());
  }
  out->set_nodes(hostlist::Compress(held));
  PlacementToWire(topology, job.run.placement.grants, nodes, job.gang.segment.value_or(0),
                  out->mutable_placement());
  for (const int channel : job.run.imex_channels) out->add_imex_channels(channel);
  std::vector<std::string> leaves;
  for (const topology::SwitchId s : job.run.placement.leaves)
    leaves.push_back(topology.GetSwitch(s).name);
  out->set_leaves(fmt::format("{}", fmt::join(leaves, ",")));
  out->set_exit_code(job.run.exit_code);
  out->set_exit_signal(job.run.exit_signal);
  out->set_attempt(job.run.attempt);
  out->set_time_limit_s(job.time_limit == kUnlimited ? 0 : job.time_limit.count());
  out->set_queue_position(queue_position);
  out->set_display_id(DisplayId(job));
  out->set_array_job_id(job.array.job_id);
  out->set_array_task_id(job.array.task_id);
  if (!job.array.pending.empty()) {
    out->set_array_pending(FormatArrayTasks(job.array.pending, job.request.array.max_running));
  }
  // As Slurm's: a held job's priority is 0 (sprio still shows its factors).
  out->set_priority(job.state == JobState::kPending && !IsHeld(job) ? job.cache.priority : 0);
  out->set_expected_start_ms(job.state == JobState::kPending ? job.cache.expected_start.count()
                                                             : 0);
  for (const PreemptionRecord& p : job.preemption.records)
    PreemptionToWire(p, out->add_preemptions());
  out->set_qos(job.qos);
  out->set_held(IsHeld(job));
  out->set_dependency(FormatDependency(job.wait.dependency_left));
  out->set_suspended(IsSuspended(job));
  out->set_preempt_deadline_ms(job.preemption.deadline.count());
  UsageToWire(job.run.own_usage, *out);
  StepsToWire(job, job.state, topology, out);
}

void ExplanationToWire(const Explanation& why, v1::ExplainJobResponse* out) {
  out->set_expected_start_ms(why.expected_start.count());
  out->set_explained_at_ms(why.explained_at.count());
  if (why.status.state == JobState::kPending) {
    out->set_pending_reason(std::string(PendingReasonName(why.reason)));
  }
  v1::WaitFacts& wait = *out->mutable_wait();
  wait.set_partition(why.wait.partition);
  wait.set_nodes(why.wait.nodes);
  wait.set_ahead_count(why.wait.ahead_count);
  for (const JobAhead& a : why.wait.ahead) {
    v1::JobAhead& ahead = *wait.add_ahead();
    ahead.set_display_id(a.display_id);
    ahead.set_priority(a.priority);
    ahead.set_nodes(a.nodes);
  }
  wait.set_shortfall(why.wait.shortfall);
  for (const LeafFit& l : why.wait.closest_leaves) {
    v1::LeafFit& leaf = *wait.add_closest_leaves();
    leaf.set_name(l.name);
    leaf.set_fitting(l.fitting);
    leaf.set_nodes(l.nodes);
  }
  wait.set_preempting(why.wait.preempting);
  wait.set_beyond_backfill_depth(why.wait.beyond_backfill_depth);
  wait.set_has_time_limit(why.wait.has_time_limit);
  v1::Counterfactuals& sooner = *out->mutable_sooner();
  sooner.set_fewer_nodes(why.sooner.fewer_nodes);
  sooner.set_without_switches(why.sooner.without_switches);
  for (const std::string& p : why.sooner.partitions) sooner.add_partitions(p);
}

void PreemptionToWire(const PreemptionRecord& preemption, v1::Preemption* out) {
  out->set_time_ms(preemption.time.count());
  out->set_by_job(preemption.by_job);
  out->set_by_display_id(preemption.by_display_id);
  out->set_mode(preemption.mode);
  out->set_attempt(preemption.attempt);
  out->set_signal(preemption.signal);
  out->set_grace_s(preemption.grace.count());
  out->set_detail(preemption.detail);
}

PreemptionRecord PreemptionFromWire(const v1::Preemption& preemption) {
  PreemptionRecord out;
  out.time = Millis(preemption.time_ms());
  out.by_job = preemption.by_job();
  out.by_display_id = preemption.by_display_id();
  out.mode = preemption.mode();
  out.attempt = preemption.attempt();
  out.signal = preemption.signal();
  out.grace = std::chrono::seconds(preemption.grace_s());
  out.detail = preemption.detail();
  return out;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace cohort::controller
