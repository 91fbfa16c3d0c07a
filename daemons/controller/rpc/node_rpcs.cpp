// SPDX-License-Identifier: Apache-2.0
#include "rpc/node_rpcs.h"

#include <algorithm>
#include <bit>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/text/hostlist.h"
#include "controller_log.h"
#include "rpc/authenticator.h"
#include "store/reservation_records.h"

namespace cohort::controller {
namespace {

// Sentences of NVLink disagreement one GetTopology answer carries.
constexpr int kMaxContradictions = 100;

}  // namespace

absl::StatusOr<std::vector<NodeId>> NodeRpcs::Resolve(const std::string& hostlist) const {
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(hostlist);
  if (!names.ok()) return names.status();
  std::vector<NodeId> nodes;
  for (const std::string& name : *names) {
    const std::optional<NodeId> id = state_.topology->FindNode(name);
    if (!id) return absl::NotFoundError(fmt::format("no node {}; see cohort nodes", name));
    nodes.push_back(*id);
  }
  return nodes;
}

void NodeRpcs::NodeToWire(NodeId n, v1::Node* out) const {
  const topology::Topology& topology = *state_.topology;
  const alloc::NodePool& pool = state_.engine.Pool();
  const NodeView view = state_.engine.ViewNode(n);
  const alloc::NodeCapacity& capacity = pool.Capacity(n);
  const alloc::NodeFree& free = pool.Free(n);
  out->set_name(topology.NodeName(n));
  out->set_state(ToWire(view.status));
  out->set_reason(view.reason);
  if (view.reason_uid) out->set_reason_user(UserNameOf(*view.reason_uid));
  out->set_reason_time_ms(view.reason_time.count());
  out->set_not_responding(view.not_responding);
  out->set_last_heard_ms(view.last_heard.count());
  out->set_cpus(capacity.cpus);
  out->set_cpus_allocated(capacity.cpus - free.cpus);
  out->set_memory_mb(capacity.memory_mb);
  out->set_memory_allocated_mb(capacity.memory_mb - free.memory_mb);
  out->set_gpus(capacity.gpus);
  out->set_gpus_allocated(capacity.gpus - std::popcount(free.gpus));
  // The GPU type is a feature of the pool (`gpu:TYPE`) but not a Features= one.
  constexpr std::string_view kGpuType = "gpu:";
  for (std::size_t i = 0; i < pool.FeatureNames().size(); ++i) {
    if (((capacity.features >> i) & 1U) == 0) continue;
    const std::string& name = pool.FeatureNames()[i];
    if (name.starts_with(kGpuType)) {
      out->set_gpu_type(name.substr(kGpuType.size()));
    } else {
      out->add_features(name);
    }
  }
  for (alloc::PartitionId p = 0; p < pool.PartitionCount(); ++p) {
    if (pool.GetPartition(p).contains[static_cast<std::size_t>(n)] != 0) {
      out->add_partitions(pool.GetPartition(p).name);
    }
  }
  for (const JobId id : view.jobs) out->add_jobs(id);
  const topology::SwitchId leaf = topology.LeafOf(n);
  if (leaf != topology::kNone) out->set_leaf(topology.GetSwitch(leaf).name);
  const topology::BlockId block = topology.BlockOf(n);
  if (block != topology::kNone) out->set_block(topology.Blocks()[block].name);
}

void NodeRpcs::ListNodes(v1::ListNodesRequest& request, const Identity& /*who*/,
                         Reply<v1::ListNodesResponse> reply) {
  std::vector<NodeId> nodes;
  if (request.nodes().empty()) {
    for (NodeId n = 0; n < state_.topology->NodeCount(); ++n) nodes.push_back(n);
  } else {
    absl::StatusOr<std::vector<NodeId>> named = Resolve(request.nodes());
    if (!named.ok()) {
      outbox_.Respond<v1::ListNodesResponse>(std::move(reply), named.status());
      return;
    }
    nodes = *std::move(named);
  }
  v1::ListNodesResponse response;
  for (const NodeId n : nodes) NodeToWire(n, response.add_nodes());
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::ListNodesResponse>(std::move(response)));
}

void NodeRpcs::UpdateNode(v1::UpdateNodeRequest& request, const Identity& who,
                          Reply<v1::UpdateNodeResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing nodes"); !trusted.ok()) {
    outbox_.Respond<v1::UpdateNodeResponse>(std::move(reply), trusted);
    return;
  }
  absl::StatusOr<std::vector<NodeId>> nodes = Resolve(request.nodes());
  if (!nodes.ok()) {
    outbox_.Respond<v1::UpdateNodeResponse>(std::move(reply), nodes.status());
    return;
  }
  Effects effects;
  const Millis now = ControllerState::Now();
  for (const NodeId n : *nodes) {
    absl::Status s;
    std::string_view action;
    if (request.action() == v1::NODE_DRAIN) {
      action = "drain";
      s = state_.engine.Drain(n, request.reason(), who.AsCaller(), now, effects);
    } else if (request.action() == v1::NODE_SET_DOWN) {
      action = "down";
      s = state_.engine.Down(n, request.reason(), who.AsCaller(), now, effects);
    } else if (request.action() == v1::NODE_RESUME) {
      action = "resume";
      s = state_.engine.Resume(n, who.AsCaller(), effects);
    } else {
      s = absl::InvalidArgumentError("action: say drain, down or resume");
    }
    if (!s.ok()) {
      sink_.Execute(effects);
      outbox_.Respond<v1::UpdateNodeResponse>(std::move(reply), s);
      return;
    }
    Log("controller")
        ->info("node_update node={} action={} by_uid={} reason={:?}", state_.topology->NodeName(n),
               action, who.uid, request.reason());
  }
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::UpdateNodeResponse>(v1::UpdateNodeResponse{}));
}

void NodeRpcs::UpdatePartition(v1::UpdatePartitionRequest& request, const Identity& who,
                               Reply<v1::UpdatePartitionResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing partitions"); !trusted.ok()) {
    outbox_.Respond<v1::UpdatePartitionResponse>(std::move(reply), trusted);
    return;
  }
  const std::optional<config::PartitionState> state =
      config::ParsePartitionStateName(request.state());
  if (!state) {
    outbox_.Respond<v1::UpdatePartitionResponse>(
        std::move(reply),
        absl::InvalidArgumentError(fmt::format(
            "State={}: not a partition state; say UP, DOWN, DRAIN or INACTIVE", request.state())));
    return;
  }
  Effects effects;
  if (absl::Status s = state_.engine.SetPartitionState(request.name(), *state, who.AsCaller(),
                                                       ControllerState::Now(), effects);
      !s.ok()) {
    outbox_.Respond<v1::UpdatePartitionResponse>(std::move(reply), s);
    return;
  }
  Log("controller")
      ->info("partition_update partition={} state={} by_uid={}", request.name(),
             config::PartitionStateName(*state), who.uid);
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::UpdatePartitionResponse>(v1::UpdatePartitionResponse{}));
}

void NodeRpcs::ListPartitions(v1::ListPartitionsRequest& request, const Identity& /*who*/,
                              Reply<v1::ListPartitionsResponse> reply) {
  v1::ListPartitionsResponse response;
  const alloc::NodePool& pool = state_.engine.Pool();
  for (const config::PartitionSpec& spec : state_.config.partitions) {
    if (!request.name().empty() && spec.name != request.name()) continue;
    v1::Partition* out = response.add_partitions();
    out->set_name(spec.name);
    out->set_nodes(hostlist::Compress(spec.nodes));
    out->set_is_default(spec.is_default);
    out->set_max_time_s(spec.max_time == kUnlimited ? 0 : spec.max_time.count());
    out->set_default_time_s(spec.default_time ? spec.default_time->count() : 0);
    out->set_max_nodes(spec.max_nodes.value_or(0));
    out->set_priority_tier(spec.priority_tier);
    out->set_total_nodes(static_cast<int>(spec.nodes.size()));
    int cpus = 0;
    int gpus = 0;
    for (const std::string& name : spec.nodes) {
      if (const std::optional<NodeId> n = state_.topology->FindNode(name)) {
        cpus += pool.Capacity(*n).cpus;
        gpus += pool.Capacity(*n).gpus;
      }
    }
    out->set_total_cpus(cpus);
    out->set_total_gpus(gpus);
    for (const std::string& a : spec.allow_accounts) out->add_allow_accounts(a);
    for (const std::string& u : spec.allow_users) out->add_allow_users(u);
    if (spec.preempt_mode) out->set_preempt_mode(std::string(PreemptModeName(*spec.preempt_mode)));
    out->set_state(std::string(config::PartitionStateName(state_.engine.PartitionState(spec))));
    if (const PartitionAdmin* set = state_.engine.PartitionOverride(spec.name)) {
      if (set->uid) out->set_state_user(UserNameOf(*set->uid));
      out->set_state_time_ms(set->since.count());
    }
  }
  if (!request.name().empty() && response.partitions().empty()) {
    std::vector<std::string> names;
    for (const config::PartitionSpec& spec : state_.config.partitions) names.push_back(spec.name);
    outbox_.Respond<v1::ListPartitionsResponse>(
        std::move(reply), absl::NotFoundError(fmt::format("no partition {}; partitions: {}",
                                                          request.name(), fmt::join(names, ", "))));
    return;
  }
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::ListPartitionsResponse>(std::move(response)));
}

void NodeRpcs::GetTopology(v1::GetTopologyRequest& /*request*/, const Identity& /*who*/,
                           Reply<v1::GetTopologyResponse> reply) {
  const topology::Topology& topology = *state_.topology;
  // Per node: 0 idle, 1 running jobs, 2 unavailable.
  std::vector<int> kind(static_cast<std::size_t>(topology.NodeCount()));
  for (NodeId n = 0; n < topology.NodeCount(); ++n) {
    switch (state_.engine.ViewNode(n).status) {
      case NodeStatus::kIdle:
        kind[static_cast<std::size_t>(n)] = 0;
        break;
      case NodeStatus::kMixed:
      case NodeStatus::kAllocated:
        kind[static_cast<std::size_t>(n)] = 1;
        break;
      default:
        kind[static_cast<std::size_t>(n)] = 2;
        break;
    }
  }
  v1::GetTopologyResponse response;
  for (const topology::SwitchId s : topology.SwitchesByLevel()) {
    const topology::Switch& sw = topology.GetSwitch(s);
    v1::Switch* out = response.add_switches();
    out->set_name(sw.name);
    out->set_level(sw.level);
    if (sw.parent != topology::kNone) out->set_parent(topology.GetSwitch(sw.parent).name);
    for (const topology::SwitchId c : sw.children) out->add_children(topology.GetSwitch(c).name);
    std::vector<std::string> names;
    for (const NodeId n : sw.nodes) names.push_back(topology.NodeName(n));
    out->set_nodes(hostlist::Compress(names));
    out->set_node_count(sw.node_count);
    int counts[3] = {0, 0, 0};
    for (const topology::SwitchId leaf : sw.leaves) {
      for (const NodeId n : topology.GetSwitch(leaf).nodes)
        ++counts[kind[static_cast<std::size_t>(n)]];
    }
    out->set_idle(counts[0]);
    out->set_allocated(counts[1]);
    out->set_unavailable(counts[2]);
  }
  for (const topology::SwitchId r : topology.Roots())
    response.add_roots(topology.GetSwitch(r).name);
  response.set_nvlink_reporting(static_cast<int>(state_.nvlink_domains.ReportedCount()));
  const std::vector<std::string> found = state_.nvlink_domains.Contradictions(topology);
  const std::set<std::string> contradictions(found.begin(), found.end());
  for (const std::string& sentence : contradictions) {
    if (response.nvlink_contradictions_size() == kMaxContradictions) break;
    response.add_nvlink_contradictions(sentence);
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::GetTopologyResponse>(std::move(response)));
}

namespace {

std::vector<std::string> CommaWords(const std::string& text) {
  std::vector<std::string> words;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// The fields a create or an update gives, onto `r`.
absl::Status ApplyFields(const v1::UpdateReservationRequest& request,
                         const topology::Topology& topology, AdvanceReservation& r) {
  if (request.has_start_ms()) {
    const Millis length = r.end - r.start;
    r.start = Millis(request.start_ms());
    // Moved, a reservation keeps its length unless an end or a duration is given.
    if (!request.has_end_ms() && !request.has_duration_s() && length.count() > 0) {
      r.end = r.start + length;
    }
  }
  if (request.has_duration_s()) {
    if (request.duration_s() <= 0) {
      return absl::InvalidArgumentError("Duration= must be longer than 0");
    }
    r.end =
        r.start + std::chrono::duration_cast<Millis>(std::chrono::seconds(request.duration_s()));
  }
  if (request.has_end_ms()) r.end = Millis(request.end_ms());
  if (request.has_nodes() && EqualsIgnoreCase(request.nodes(), "ALL")) {
    r.nodes.clear();
    for (NodeId n = 0; n < topology.NodeCount(); ++n) r.nodes.push_back(n);
  } else if (request.has_nodes()) {
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodes());
    if (!names.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("Nodes={}: {}", request.nodes(), std::string(names.status().message())));
    }
    r.nodes.clear();
    for (const std::string& name : *names) {
      const std::optional<NodeId> node = topology.FindNode(name);
      if (!node) {
        return absl::InvalidArgumentError(
            fmt::format("Nodes=: no node {}; sinfo -N lists them", name));
      }
      r.nodes.push_back(*node);
    }
  }
  if (request.has_users()) r.users = CommaWords(request.users());
  if (request.has_accounts()) r.accounts = CommaWords(request.accounts());
  if (request.has_partition()) r.partition = request.partition();
  if (request.has_flags()) {
    absl::StatusOr<std::uint32_t> flags = ParseReservationFlags(request.flags());
    if (!flags.ok()) return flags.status();
    r.flags = *flags;
  }
  if (request.has_switches()) r.switches = request.switches();
  if (request.has_nodes()) r.by_count = false;
  if (request.has_node_count() && request.node_count() < 0) {
    return absl::InvalidArgumentError("NodeCnt= must be 1 or more");
  }
  return absl::OkStatus();
}

}  // namespace

void NodeRpcs::ListReservations(v1::ListReservationsRequest& /*request*/, const Identity& /*who*/,
                                Reply<v1::ListReservationsResponse> reply) {
  std::vector<AdvanceReservation> all = state_.engine.Reservations();
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.name < b.name;
  });
  v1::ListReservationsResponse response;
  const Millis now = ControllerState::Now();
  for (const AdvanceReservation& r : all) {
    ReservationToWire(r, *state_.topology, now, *response.add_reservations());
  }
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::ListReservationsResponse>(std::move(response)));
}

void NodeRpcs::UpdateReservation(v1::UpdateReservationRequest& request, const Identity& who,
                                 Reply<v1::UpdateReservationResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing reservations"); !trusted.ok()) {
    outbox_.Respond<v1::UpdateReservationResponse>(std::move(reply), trusted);
    return;
  }
  const Millis now = ControllerState::Now();
  Effects effects;
  absl::Status done;
  const std::string& verb = request.verb();
  if (verb == "delete") {
    done = state_.engine.DeleteReservation(request.name(), who.AsCaller(), effects);
  } else if (verb == "create" || verb == "update") {
    AdvanceReservation r;
    if (verb == "update") {
      for (const AdvanceReservation& existing : state_.engine.Reservations()) {
        if (existing.name == request.name()) r = existing;
      }
      if (r.name.empty()) {
        done = absl::NotFoundError(
            fmt::format("no reservation {}; scontrol show reservation lists them", request.name()));
      }
    } else {
      r.name = request.name();
      r.start = now;
      if (!request.has_end_ms() && !request.has_duration_s()) {
        done = absl::InvalidArgumentError("give the reservation's end: Duration= or EndTime=");
      }
    }
    if (done.ok()) done = ApplyFields(request, *state_.topology, r);
    if (done.ok()) {
      done = verb == "create" ? state_.engine.CreateReservation(std::move(r), request.node_count(),
                                                                who.AsCaller(), now, effects)
                              : state_.engine.UpdateReservation(std::move(r), request.node_count(),
                                                                who.AsCaller(), now, effects);
    }
  } else {
    done = absl::InvalidArgumentError(
        fmt::format("\"{}\": reservations are created, updated or deleted", verb));
  }
  if (!done.ok()) {
    outbox_.Respond<v1::UpdateReservationResponse>(std::move(reply), done);
    return;
  }
  v1::UpdateReservationResponse response;
  for (const AdvanceReservation& r : state_.engine.Reservations()) {
    if (r.name == request.name())
      ReservationToWire(r, *state_.topology, now, *response.mutable_reservation());
  }
  Log("controller")
      ->info("reservation_{} name={} nodes={} start_ms={} end_ms={} flags={} by_uid={}", verb,
             request.name(), response.reservation().nodes(), response.reservation().start_ms(),
             response.reservation().end_ms(), response.reservation().flags(), who.uid);
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  absl::StatusOr<v1::UpdateReservationResponse>(std::move(response)));
}

}  // namespace cohort::controller
