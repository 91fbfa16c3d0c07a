// SPDX-License-Identifier: Apache-2.0
#include "engine/engine_support.h"

#include <string.h>

#include <algorithm>
#include <bit>
#include <ctime>

#include <fmt/format.h>

#include "cohort/alloc/reservation_timeline.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"

namespace cohort::engine {

bool Lists(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

int GpusHeld(const Job& job) {
  int gpus = 0;
  for (const alloc::NodeGrant& g : job.run.placement.grants) gpus += std::popcount(g.gpus);
  return gpus;
}

int CpusHeld(const Job& job) {
  int cpus = 0;
  for (const alloc::NodeGrant& g : job.run.placement.grants) cpus += g.cpus;
  return cpus;
}

int RanksOk(const Job& job) {
  int ok = 0;
  for (const int n : job.run.exited_ok) ok += n;
  return ok;
}

bool AllReleased(const Job& job) {
  return std::all_of(job.run.released.begin(), job.run.released.end(),
                     [](std::uint8_t r) { return r; });
}

int NodeRankOf(const Job& job, NodeId node) {
  for (std::size_t i = 0; i < job.run.placement.grants.size(); ++i) {
    if (job.run.placement.grants[i].node == node) return static_cast<int>(i);
  }
  return -1;
}

bool Touches(const Job& job, const alloc::Placement& placement) {
  for (const alloc::NodeGrant& mine : job.run.placement.grants) {
    for (const alloc::NodeGrant& theirs : placement.grants) {
      if (mine.node == theirs.node) return true;
    }
  }
  return false;
}

Millis EndBound(const Job& job, Millis now) {
  if (job.state == JobState::kCompleting) return now;
  if (job.time_limit == kUnlimited) return Millis::max();
  return std::max(job.run.start_time + ToMillis(job.time_limit), now);
}

bool MayFit(const alloc::GangRequest& gang, const alloc::NodePool& pool, NodeId node) {
  return pool.Condition(node) == alloc::NodeCondition::kUp &&
         MayFitOneNode(gang, pool.Capacity(node), pool.Free(node));
}

std::vector<NodeId> NodesThatMayFit(const alloc::GangRequest& gang, const alloc::NodePool& pool) {
  std::vector<NodeId> nodes;
  const auto add = [&](NodeId n) {
    if (MayFit(gang, pool, n)) nodes.push_back(n);
  };
  if (gang.partition) {
    for (const NodeId n : pool.GetPartition(*gang.partition).nodes) add(n);
  } else {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) add(n);
  }
  return nodes;
}

std::vector<alloc::NodeGrant> HeldGrants(const Job& job) {
  std::vector<alloc::NodeGrant> held;
  ForEachHeldGrant(job, [&](const alloc::NodeGrant& g) { held.push_back(g); });
  return held;
}

std::string SignalName(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name == nullptr ? std::to_string(signal) : std::string(name);
}

std::string Hms(Millis t) {
  const auto seconds = static_cast<std::time_t>(t.count() / 1000);
  std::tm tm{};
  ::localtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string NodeNames(const topology::Topology& topology, const alloc::Placement& placement) {
  std::vector<NodeId> nodes;
  nodes.reserve(placement.grants.size());
  for (const alloc::NodeGrant& g : placement.grants) nodes.push_back(g.node);
  return NodeNames(topology, nodes);
}

std::string NodeNames(const topology::Topology& topology, std::span<const NodeId> nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NodeId n : nodes) names.push_back(topology.NodeName(n));
  return hostlist::Compress(names);
}

}  // namespace cohort::engine
