// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/alloc/channel_pool.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/plugin.h"
#include "engine/admission.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/node_book.h"
#include "engine/pass_planner.h"
#include "engine/pass_triggers.h"
#include "engine/preemption.h"
#include "engine/prioritizer.h"

namespace cohort::engine {

/// The parts of one engine, each owning its own state, built in the order
/// of their dependencies, which run one way (facade → planner → {node
/// book, admission, preemption} → {lifecycle, prioritizer} → {job book,
/// pass triggers}): each part is handed the parts below it that it uses
/// when it is built and reaches no other. Engine (the facade in
/// include/cohort/engine/engine.h) forwards to them; all of it runs on the
/// caller's one thread.
struct EngineCore {
  EngineCore(const config::ClusterConfig& cluster, const topology::Topology& tree,
             alloc::NodePool nodes_pool);
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  config::ClusterConfig config;  ///< with the default QOS declared
  plugin::PluginSet plugins;     ///< the policies config.plugins chooses
  const topology::Topology& topology;
  alloc::NodePool pool;
  alloc::GangAllocator allocator;
  JobBook book;
  PassTriggers triggers;
  Prioritizer priority;
  alloc::ChannelPool imex;  ///< IMEX channels (SwitchType=switch/nvidia_imex); none otherwise
  Lifecycle life;
  ReservationBook reservations;  ///< operators' reservations
  Admission admission;
  Preemption preemption;
  NodeBook nodes;
  PassPlanner planner;
  /// sacctmgr's changes, oldest first, the last kAuditKept.
  std::vector<AccountAudit> audit;
};

}  // namespace cohort::engine
