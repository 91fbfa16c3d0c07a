// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "admission.h"
#include "cohort/cluster_config.h"
#include "cohort/gang_allocator.h"
#include "cohort/node_pool.h"
#include "cohort/plugin.h"
#include "cohort/topology.h"
#include "job_book.h"
#include "lifecycle.h"
#include "node_book.h"
#include "pass_planner.h"
#include "pass_triggers.h"
#include "preemption.h"
#include "prioritizer.h"

namespace cohort::engine {

/// The parts of one engine, each owning its own state, built in the order
/// of their dependencies, which run one way (facade → planner → {node
/// book, admission, preemption} → {lifecycle, prioritizer} → {job book,
/// pass triggers}): each part is handed the parts below it that it uses
/// when it is built and reaches no other. Engine (the facade in
/// include/cohort/engine.h) forwards to them; all of it runs on the
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
  Lifecycle life;
  Admission admission;
  Preemption preemption;
  NodeBook nodes;
  PassPlanner planner;
};

}  // namespace cohort::engine
