// SPDX-License-Identifier: Apache-2.0
// The facade's calls on operators' reservations: who may make them, which
// nodes a reservation by count gets, and the running jobs it would meet.
#include <algorithm>

#include <fmt/format.h>

#include "cohort/engine/engine.h"
#include "engine/engine_core.h"
#include "engine/engine_support.h"

namespace cohort {
namespace {

absl::Status OperatorsOnly(const Caller& caller) {
  if (caller.IsOperator()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "only root and Operators= (in cohort.conf) may make, change or delete reservations");
}

// Running jobs on `r`'s nodes that may still run at its start.
std::vector<const Job*> Displaced(const engine::EngineCore& core, const AdvanceReservation& r,
                                  Millis now) {
  std::vector<const Job*> jobs;
  for (const Job* job : core.book.Active()) {
    if (engine::EndBound(*job, now) <= r.start) continue;
    bool touches = false;
    engine::ForEachHeldGrant(*job, [&](const alloc::NodeGrant& g) {
      touches |= std::binary_search(r.nodes.begin(), r.nodes.end(), g.node);
    });
    if (touches) jobs.push_back(job);
  }
  return jobs;
}

// Nodes other reservations hold during `r`'s window (all of them with
// OVERLAP on neither side excepted).
std::vector<NodeId> HeldByOthers(const engine::ReservationBook& book, const AdvanceReservation& r) {
  std::vector<NodeId> nodes;
  for (const AdvanceReservation& other : book.All()) {
    if (other.name == r.name || (other.flags & kResvOverlap) != 0 ||
        (r.flags & kResvOverlap) != 0) {
      continue;
    }
    if (other.start < r.end && r.start < other.end) {
      nodes.insert(nodes.end(), other.nodes.begin(), other.nodes.end());
    }
  }
  return nodes;
}

// `count` whole nodes for `r`, chosen by the gang allocator as for a job:
// closest under one switch (at most r.switches leaves where set), on a pool
// as it is once running jobs end. The reservation's own jobs keep no node
// from it.
absl::StatusOr<std::vector<NodeId>> ChooseNodes(engine::EngineCore& core,
                                                const AdvanceReservation& r, int count,
                                                Millis now) {
  if (count > core.topology.NodeCount()) {
    return absl::InvalidArgumentError(
        fmt::format("NodeCnt={}: the cluster has {} nodes", count, core.topology.NodeCount()));
  }
  alloc::NodePool pool = core.pool;
  alloc::GangRequest gang;
  gang.nodes = count;
  gang.exclusivity = alloc::Exclusivity::kExclusive;
  if (r.switches > 0) gang.max_leaves = r.switches;
  if (!r.partition.empty()) gang.partition = pool.FindPartition(r.partition);
  gang.excluded_nodes = HeldByOthers(core.reservations, r);
  for (const Job* job : core.book.Active()) {
    const std::vector<alloc::NodeGrant> grants = engine::HeldGrants(*job);
    pool.Release(grants);
    if ((r.flags & kResvIgnoreJobs) == 0 && job->request.reservation != r.name &&
        engine::EndBound(*job, now) > r.start) {
      for (const alloc::NodeGrant& g : grants) gang.excluded_nodes.push_back(g.node);
    }
  }
  const alloc::PlacementResult placed = core.allocator.Place(gang, pool);
  if (placed.outcome != alloc::Outcome::kPlaced) {
    return absl::FailedPreconditionError(fmt::format(
        "no {} nodes{} are free of other reservations{} then ({}); ask for fewer{}, a later "
        "StartTime=, or name Nodes=",
        count,
        r.switches > 0 ? fmt::format(" under at most {} leaf switches", r.switches) : std::string(),
        (r.flags & kResvIgnoreJobs) == 0 ? " and of jobs that may still run" : "", placed.reason,
        r.switches > 0 ? " or more Switches=" : ""));
  }
  std::vector<NodeId> nodes;
  for (const alloc::NodeGrant& g : placed.placement.grants) nodes.push_back(g.node);
  return nodes;
}

absl::Status CheckPartition(const engine::EngineCore& core, const AdvanceReservation& r) {
  if (r.partition.empty() || core.config.FindPartition(r.partition) != nullptr) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      fmt::format("PartitionName={}: no such partition; sinfo lists them", r.partition));
}

absl::Status CheckJobs(const engine::EngineCore& core, const AdvanceReservation& r, Millis now) {
  if ((r.flags & kResvIgnoreJobs) != 0) return absl::OkStatus();
  const std::vector<const Job*> jobs = Displaced(core, r, now);
  if (jobs.empty()) return absl::OkStatus();
  std::vector<std::string> named;
  for (const Job* job : jobs) {
    if (named.size() == 5) {
      named.push_back(fmt::format("and {} more", jobs.size() - 5));
      break;
    }
    const Millis end = engine::EndBound(*job, now);
    named.push_back(fmt::format("{} (until {})", DisplayId(*job),
                                end == Millis::max() ? std::string("no limit") : engine::Hms(end)));
  }
  return absl::FailedPreconditionError(fmt::format(
      "running jobs on these nodes may still run at the start: {}; give a later StartTime=, "
      "other nodes, or Flags=IGNORE_JOBS",
      fmt::join(named, ", ")));
}

absl::Status CheckShape(const AdvanceReservation& r, const topology::Topology& topology) {
  const int switches = std::max(1, static_cast<int>(topology.Switches().size()));
  if (r.switches < 0 || r.switches > switches) {
    return absl::InvalidArgumentError(fmt::format(
        "Switches={}: give 1 to {} leaf switches, or leave it out", r.switches, switches));
  }
  if (r.switches > 0 && !r.by_count) {
    return absl::InvalidArgumentError(
        "Switches= shapes a reservation by count: give NodeCnt= instead of Nodes=");
  }
  return absl::OkStatus();
}

// Whether `node` can serve `r` now: up and taking work, and (unless
// IGNORE_JOBS) held by none but the reservation's own jobs.
bool Serves(const engine::EngineCore& core, const AdvanceReservation& r, NodeId node) {
  switch (core.nodes.View(node).status) {
    case NodeStatus::kIdle:
    case NodeStatus::kMixed:
    case NodeStatus::kAllocated:
      break;
    case NodeStatus::kUnknown:  // not checked while so (PlaceReservationsAtStart)
    case NodeStatus::kDraining:
    case NodeStatus::kDrained:
    case NodeStatus::kDown:
      return false;
  }
  if ((r.flags & kResvIgnoreJobs) != 0) return true;
  for (const Job* job : core.book.Active()) {
    if (job->request.reservation == r.name) continue;
    bool holds = false;
    engine::ForEachHeldGrant(*job, [&](const alloc::NodeGrant& g) { holds |= g.node == node; });
    if (holds) return false;
  }
  return true;
}

}  // namespace

void Engine::PlaceReservationsAtStart(Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  std::vector<AdvanceReservation> due;  // by count, their window begun, not yet checked
  for (const AdvanceReservation& r : core.reservations.All()) {
    if (r.by_count && r.start <= now && now < r.end && r.placed_for != r.start) due.push_back(r);
  }
  for (AdvanceReservation& r : due) {
    // A node not heard from yet (a controller just restarted) is not judged
    // until its agent registers or NodeTimeout finds it lost.
    if (std::any_of(r.nodes.begin(), r.nodes.end(),
                    [&](NodeId n) { return core.nodes.View(n).status == NodeStatus::kUnknown; })) {
      continue;
    }
    core.reservations.MarkPlaced(r.name, r.start);
    if (std::all_of(r.nodes.begin(), r.nodes.end(), [&](NodeId n) { return Serves(core, r, n); })) {
      continue;
    }
    absl::StatusOr<std::vector<NodeId>> chosen =
        ChooseNodes(core, r, static_cast<int>(r.nodes.size()), now);
    // Where no set serves, it keeps its nodes: those that serve do, and the
    // others may come back within the window.
    if (!chosen.ok()) continue;
    r.nodes = *std::move(chosen);
    r.placed_for = r.start;
    if (core.reservations.Put(std::move(r), true, now).ok()) {
      effects.changed_reservations = true;
      core.triggers.Note(engine::Trigger::kReservations);
    }
  }
}

absl::Status Engine::CreateReservation(AdvanceReservation reservation, int node_count,
                                       const Caller& caller, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  if (absl::Status s = OperatorsOnly(caller); !s.ok()) return s;
  if (absl::Status s = CheckPartition(core, reservation); !s.ok()) return s;
  reservation.by_count = reservation.nodes.empty() && node_count > 0;
  if (absl::Status s = CheckShape(reservation, core.topology); !s.ok()) return s;
  if (reservation.by_count) {
    absl::StatusOr<std::vector<NodeId>> chosen = ChooseNodes(core, reservation, node_count, now);
    if (!chosen.ok()) return chosen.status();
    reservation.nodes = *std::move(chosen);
  }
  std::sort(reservation.nodes.begin(), reservation.nodes.end());
  if (absl::Status s = CheckJobs(core, reservation, now); !s.ok()) return s;
  reservation.uid = caller.uid;
  reservation.created = now;
  if (absl::Status s = core.reservations.Put(std::move(reservation), false, now); !s.ok()) return s;
  core.triggers.Note(engine::Trigger::kReservations);
  effects.changed_reservations = true;
  return absl::OkStatus();
}

absl::Status Engine::UpdateReservation(AdvanceReservation reservation, int node_count,
                                       const Caller& caller, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  if (absl::Status s = OperatorsOnly(caller); !s.ok()) return s;
  if (absl::Status s = CheckPartition(core, reservation); !s.ok()) return s;
  const AdvanceReservation* before = core.reservations.Find(reservation.name);
  if (node_count > 0) reservation.by_count = true;
  if (absl::Status s = CheckShape(reservation, core.topology); !s.ok()) return s;
  const bool reshaped =
      before != nullptr && reservation.by_count &&
      (node_count > 0 || reservation.switches != before->switches ||
       reservation.start != before->start || reservation.partition != before->partition);
  if (reshaped) {
    // Chosen again for the new shape or window: the old nodes are free.
    const int count = node_count > 0 ? node_count : static_cast<int>(reservation.nodes.size());
    AdvanceReservation scratch = reservation;
    scratch.nodes.clear();
    absl::StatusOr<std::vector<NodeId>> chosen = ChooseNodes(core, scratch, count, now);
    if (!chosen.ok()) return chosen.status();
    reservation.nodes = *std::move(chosen);
    reservation.placed_for = Millis(0);
  }
  std::sort(reservation.nodes.begin(), reservation.nodes.end());
  if (absl::Status s = CheckJobs(core, reservation, now); !s.ok()) return s;
  if (absl::Status s = core.reservations.Put(std::move(reservation), true, now); !s.ok()) return s;
  core.triggers.Note(engine::Trigger::kReservations);
  effects.changed_reservations = true;
  return absl::OkStatus();
}

absl::Status Engine::DeleteReservation(const std::string& name, const Caller& caller,
                                       Effects& effects) {
  engine::EngineCore& core = *core_;
  if (absl::Status s = OperatorsOnly(caller); !s.ok()) return s;
  if (absl::Status s = core.reservations.Remove(name); !s.ok()) return s;
  core.triggers.Note(engine::Trigger::kReservations);
  effects.changed_reservations = true;
  return absl::OkStatus();
}

const std::vector<AdvanceReservation>& Engine::Reservations() const {
  return core_->reservations.All();
}

}  // namespace cohort
