// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"

/// Builders and file access shared by the unit tests.
namespace cohort {

/// Tests build jobs in a status the job book would have given them (only
/// the job book, and this, hold a StatusKey).
struct JobStatusForTests {
  static void Set(Job& job, JobStatus status) {
    job.state.Set(status.state, StatusKey());
    job.sub.Set(status.sub, StatusKey());
  }
};

}  // namespace cohort

namespace cohort::testing {

/// Path of a file under tests/data.
[[nodiscard]] std::string DataPath(const std::string& relative);
/// Contents of a file under tests/data; fails the test when missing.
[[nodiscard]] std::string ReadData(const std::string& relative);

/// A cluster for allocator tests: topology, node specs and a pool over them.
struct Cluster {
  topology::Topology topology;
  std::vector<config::NodeSpec> nodes;
  alloc::NodePool pool;

  [[nodiscard]] alloc::NodeId Node(const std::string& name) const;
  [[nodiscard]] std::vector<alloc::NodeId> Nodes(const std::string& hostlist) const;
  [[nodiscard]] std::string Names(const alloc::Placement& placement) const;
  [[nodiscard]] std::vector<std::string> LeafNames(const alloc::Placement& placement) const;
};

/// Builds a two-level tree: `Leaves(4).NodesPerLeaf(8)` gives leaf[0-3] over
/// n[001-032] and one spine; `Pods(2)` adds a level of pods between them.
class ClusterBuilder {
 public:
  ClusterBuilder& Leaves(int count);
  ClusterBuilder& NodesPerLeaf(int count);
  ClusterBuilder& GpusPerNode(int count);
  ClusterBuilder& CpusPerNode(int count);
  ClusterBuilder& Pods(int count);
  ClusterBuilder& BlockSize(int nodes);
  [[nodiscard]] std::string TopologyText() const;
  [[nodiscard]] Cluster Build() const;

 private:
  int leaves_ = 2;
  int nodes_per_leaf_ = 4;
  int gpus_ = 8;
  int cpus_ = 64;
  int pods_ = 0;
  int block_size_ = 0;
};

/// A cluster from a topology.conf text, every node with `spec`'s resources.
[[nodiscard]] Cluster ClusterFromTopology(const std::string& text, const config::NodeSpec& spec);

/// A fixture that runs each test with TZ=UTC and puts the caller's TZ back
/// after, for code that prints or reads local times.
class UtcTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

 private:
  std::optional<std::string> saved_tz_;
};

}  // namespace cohort::testing
