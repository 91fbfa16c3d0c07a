// SPDX-License-Identifier: Apache-2.0
#include "test_support.h"

#include <cstdlib>
#include <ctime>

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cohort/text/hostlist.h"

namespace cohort::testing {

std::string DataPath(const std::string& relative) {
  // Appended, not `+`: g++ 12 sees a false -Warray-bounds in the temporaries.
  std::string path = COHORT_TEST_DATA;
  path += '/';
  path += relative;
  return path;
}

std::string ReadData(const std::string& relative) {
  std::ifstream in(DataPath(relative));
  EXPECT_TRUE(in.good()) << "missing test data " << DataPath(relative);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

alloc::NodeId Cluster::Node(const std::string& name) const {
  const std::optional<alloc::NodeId> id = topology.FindNode(name);
  EXPECT_TRUE(id.has_value()) << "no node " << name;
  return id.value_or(0);
}

std::vector<alloc::NodeId> Cluster::Nodes(const std::string& list) const {
  std::vector<alloc::NodeId> ids;
  const absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(list);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return ids;
  for (const std::string& name : *names) ids.push_back(Node(name));
  return ids;
}

std::string Cluster::Names(const alloc::Placement& placement) const {
  std::vector<std::string> names;
  for (const alloc::NodeGrant& g : placement.grants) names.push_back(topology.NodeName(g.node));
  return hostlist::Compress(names);
}

std::vector<std::string> Cluster::LeafNames(const alloc::Placement& placement) const {
  std::vector<std::string> names;
  for (const topology::SwitchId s : placement.leaves) names.push_back(topology.GetSwitch(s).name);
  return names;
}

ClusterBuilder& ClusterBuilder::Leaves(int count) {
  leaves_ = count;
  return *this;
}
ClusterBuilder& ClusterBuilder::NodesPerLeaf(int count) {
  nodes_per_leaf_ = count;
  return *this;
}
ClusterBuilder& ClusterBuilder::GpusPerNode(int count) {
  gpus_ = count;
  return *this;
}
ClusterBuilder& ClusterBuilder::CpusPerNode(int count) {
  cpus_ = count;
  return *this;
}
ClusterBuilder& ClusterBuilder::Pods(int count) {
  pods_ = count;
  return *this;
}
ClusterBuilder& ClusterBuilder::BlockSize(int nodes) {
  block_size_ = nodes;
  return *this;
}

std::string ClusterBuilder::TopologyText() const {
  std::string text;
  const int total = leaves_ * nodes_per_leaf_;
  for (int l = 0; l < leaves_; ++l) {
    text += fmt::format("SwitchName=leaf{} Nodes=n[{:03}-{:03}]\n", l, l * nodes_per_leaf_ + 1,
                        (l + 1) * nodes_per_leaf_);
  }
  if (pods_ > 0) {
    const int per_pod = leaves_ / pods_;
    for (int p = 0; p < pods_; ++p) {
      text += fmt::format("SwitchName=pod{} Switches=leaf[{}-{}]\n", p, p * per_pod,
                          (p + 1) * per_pod - 1);
    }
    text += fmt::format("SwitchName=core Switches=pod[0-{}]\n", pods_ - 1);
  } else if (leaves_ > 1) {
    text += fmt::format("SwitchName=spine Switches=leaf[0-{}]\n", leaves_ - 1);
  }
  if (block_size_ > 0) {
    for (int b = 0; b * block_size_ < total; ++b) {
      text += fmt::format("BlockName=block{} Nodes=n[{:03}-{:03}]\n", b, b * block_size_ + 1,
                          std::min(total, (b + 1) * block_size_));
    }
  }
  return text;
}

Cluster ClusterFromTopology(const std::string& text, const config::NodeSpec& spec) {
  topology::TopologyResult built =
      topology::BuildTopology(text, "topology.conf", {}, topology::NodeSource::kTopology);
  EXPECT_FALSE(built.diagnostics.HasErrors()) << built.diagnostics.Format();
  std::vector<config::NodeSpec> nodes;
  for (const std::string& name : built.topology.NodeNames()) {
    config::NodeSpec node = spec;
    node.name = name;
    nodes.push_back(std::move(node));
  }
  absl::StatusOr<alloc::NodePool> pool = alloc::NodePool::Create(built.topology, nodes, {});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return Cluster{std::move(built.topology), std::move(nodes), *std::move(pool)};
}

Cluster ClusterBuilder::Build() const {
  config::NodeSpec spec;
  spec.cpus = cpus_;
  spec.gpus = gpus_;
  spec.memory_mb = 1024 * 1024;
  return ClusterFromTopology(TopologyText(), spec);
}

void UtcTest::SetUp() {
  const char* tz = std::getenv("TZ");
  saved_tz_ = tz == nullptr ? std::nullopt : std::optional<std::string>(tz);
  ::setenv("TZ", "UTC", 1);
  ::tzset();
}

void UtcTest::TearDown() {
  if (saved_tz_) {
    ::setenv("TZ", saved_tz_->c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ::tzset();
}

}  // namespace cohort::testing
