// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "controller_state.h"
#include "store/store.h"
#include "test_support.h"

/// What the tests of the controller's parts share: a state database in a
/// temporary folder, and running the state thread's io_context until
/// something has happened.
namespace cohort::controller::testing {

/// A temporary folder with the state database, removed at the end.
class StateDir {
 public:
  StateDir() {
    char pattern[] = "/tmp/cohort-controller-test.XXXXXX";
    if (::mkdtemp(pattern) != nullptr) dir_ = pattern;
  }
  ~StateDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;

  [[nodiscard]] std::string Path() const { return dir_ + "/state.db"; }
  /// A new connection; fails the test when it cannot be opened.
  [[nodiscard]] std::unique_ptr<Store> Open(Store::Mode mode) const {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(Path(), mode, StateSync::kOff);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  /// The job's record as durable now, read on a connection of its own.
  [[nodiscard]] std::optional<v1::JobRecord> DurableJob(std::int64_t id) const {
    std::unique_ptr<Store> reader = Open(Store::Mode::kRead);
    if (reader == nullptr) return std::nullopt;
    absl::StatusOr<std::optional<v1::JobRecord>> record = reader->FindJob(id);
    return record.ok() ? *record : std::nullopt;
  }

 private:
  std::string dir_;
};

/// Runs `io` (the state thread, here the test's) until `done`, for at most
/// ten seconds; false when it never was.
inline bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return true;
}

/// The state of a cluster of one leaf switch of `nodes` nodes (the test
/// cluster's), all in one default partition "all" of MaxTime 1 h, whose
/// nodes time out after 30 s.
inline std::unique_ptr<ControllerState> OneLeafState(int nodes) {
  cohort::testing::Cluster cluster =
      cohort::testing::ClusterBuilder().Leaves(1).NodesPerLeaf(nodes).Build();
  config::ClusterConfig config;
  config.nodes = cluster.nodes;
  config::PartitionSpec all;
  all.name = "all";
  all.is_default = true;
  all.nodes = cluster.topology.NodeNames();
  all.max_time = std::chrono::hours(1);
  config.partitions = {all};
  config.node_timeout = std::chrono::seconds(30);
  alloc::NodePool pool =
      alloc::NodePool::Create(cluster.topology, config.nodes, config.partitions).value();
  return std::make_unique<ControllerState>(
      config, std::make_unique<topology::Topology>(std::move(cluster.topology)), std::move(pool));
}

}  // namespace cohort::controller::testing
