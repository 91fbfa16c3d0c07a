// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"

namespace cohort {
struct Effects;
struct NodeReport;
struct NodeAdmin;
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
  bool down = false;
  bool drain = false;
  std::string drain_reason;  ///< kept while the node is down, shown again after
  std::string down_reason;
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
  absl::Status Drain(NodeId node, const std::string& reason, const Caller& caller,
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
  std::vector<NodeRuntime> nodes_;
};

}  // namespace cohort::engine
