// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine_types.h"
#include "cohort/engine/job.h"

namespace cohort {
struct Effects;
struct NodeReport;
struct NodeView;
struct Caller;
}  // namespace cohort

namespace cohort::engine {

class JobBook;
class Lifecycle;
class PassTriggers;
using alloc::NodeId;

/// What the engine knows of one node beyond its resources.
struct NodeRuntime {
  bool registered = false;
  bool awaited = false;  ///< restored with jobs: must register within NodeTimeout
  bool down = false;     ///< its agent is lost (silent for NodeTimeout), until it registers
  std::string down_reason;
  Millis down_time{0};
  /// What an operator (or the controller) set: drained, set DOWN; why, by
  /// whom, since when. Kept while the node is lost, shown again after.
  NodeAdmin admin;
  Millis last_heartbeat{0};
  /// Silent for several heartbeats, not yet NodeTimeout (Slurm's
  /// NOT_RESPONDING): shown; its jobs go on until NodeTimeout.
  bool not_responding = false;
};

/// The nodes' life: registration and reconciliation with what the agent
/// reports, heartbeats, loss, drain and resume, and the condition the
/// allocator sees.
class NodeBook {
 public:
  /// The parts it uses, each of which outlives it.
  struct Parts {
    const config::ClusterConfig& config;
    const topology::Topology& topology;
    alloc::NodePool& pool;
    JobBook& book;
    PassTriggers& triggers;
    Lifecycle& life;
  };
  /// One runtime per node of the topology.
  explicit NodeBook(const Parts& parts);

  [[nodiscard]] NodeRuntime& At(NodeId node) { return nodes_[static_cast<std::size_t>(node)]; }
  [[nodiscard]] const NodeRuntime& At(NodeId node) const {
    return nodes_[static_cast<std::size_t>(node)];
  }

  absl::Status Registered(NodeId node, const NodeReport& report, Millis now, Effects& effects);
  void Heartbeat(NodeId node, Millis now);
  void Lost(NodeId node, const std::string& reason, Millis now, Effects& effects);
  /// Nodes silent for NodeTimeout are lost.
  void Tick(Millis now, Effects& effects);
  absl::Status Drain(NodeId node, const std::string& reason, const Caller& caller, Millis now,
                     Effects& effects);
  /// An operator's DOWN: its jobs stop there as if the node were lost (a
  /// gang with spares is repaired, --no-kill goes on without it, a job
  /// requeues or fails), its agent is told to end their ranks, and the node
  /// takes nothing until resumed.
  absl::Status Down(NodeId node, const std::string& reason, const Caller& caller, Millis now,
                    Effects& effects);
  absl::Status Resume(NodeId node, const Caller& caller, Effects& effects);
  /// Operators' settings kept from before a restart.
  void RestoreAdmin(const std::vector<std::pair<NodeId, NodeAdmin>>& admin);
  /// Tells the pool whether the node can take work.
  void UpdateCondition(NodeId node);

  [[nodiscard]] NodeView View(NodeId node) const;
  [[nodiscard]] NodeAdmin Admin(NodeId node) const;

 private:
  const config::ClusterConfig& config_;
  const topology::Topology& topology_;
  alloc::NodePool& pool_;
  JobBook& book_;
  PassTriggers& triggers_;
  Lifecycle& life_;
  /// The node's jobs, as its loss (or its DOWN) leaves them.
  void EndJobsOn(NodeId node, const std::string& reason, Millis now, Effects& effects);
  /// Drains the node for the controller's own reason (no operator's).
  void DrainForController(NodeRuntime& runtime, std::string reason, Millis now);

  std::vector<NodeRuntime> nodes_;
};

}  // namespace cohort::engine
