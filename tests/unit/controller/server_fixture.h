// SPDX-License-Identifier: Apache-2.0
#pragma once
// A controller service (ControllerServer) in this process: a cluster of two
// nodes with AuthType=none in a temporary folder, served on port 0 in a
// thread of its own; a gRPC client over its local socket or its TCP port.

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cohort/v1/cohort.grpc.pb.h"
#include "controller_server.h"

namespace cohort::controller::testing {

// None of these tests fails a commit or loses a lease, so a run always
// returns.
inline void NeverCalled(const ServerExit& end) {
  std::cerr << "the server left at once (status " << end.status << ", again: '" << end.again_because
            << "')\n";
  std::_Exit(2);
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cohort-server-test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ::chmod(dir_.c_str(), 0755);
    std::ofstream(dir_ / "key") << "a key of the cluster's agents, long enough\n";
    std::filesystem::permissions(dir_ / "key", std::filesystem::perms::owner_read);
    std::ofstream(dir_ / "cohort.conf") << "ClusterName=unit\n"
                                        << "StateDir=" << (dir_ / "state").string() << "\n"
                                        << "AuthType=none\n"
                                        << "AuthKeyFile=" << (dir_ / "key").string() << "\n"
                                        << "NodeName=n[1-2] CPUs=4 MemoryMB=1024\n"
                                        << "PartitionName=all Nodes=ALL Default=YES\n";
  }
  void TearDown() override {
    if (server_) {
      server_->Stop();
      running_.join();
    }
    std::filesystem::remove_all(dir_);
  }

  ServerFlags Flags() const {
    ServerFlags flags;
    flags.config_path = (dir_ / "cohort.conf").string();
    flags.listen = "127.0.0.1";
    flags.port = 0;
    flags.log_level = "warn";
    return flags;
  }

  // Runs a server until TearDown; true once it listens on its TCP port
  // (waited for a bounded while).
  bool Serve() {
    server_ = std::make_unique<ControllerServer>(Flags(), NeverCalled);
    running_ = std::thread([this] { end_ = server_->Run(); });
    for (int i = 0; i < 500 && server_->Port() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return server_->Port() != 0;
  }

  // A user of this host, over the local socket (known by its uid).
  std::unique_ptr<v1::Controller::Stub> Local() const {
    return v1::Controller::NewStub(grpc::CreateChannel(
        "unix:" + (dir_ / "state" / "cohort.sock").string(), grpc::InsecureChannelCredentials()));
  }
  // A caller over TCP: anonymous, as AuthType=none makes it.
  std::unique_ptr<v1::Controller::Stub> OverTcp() const {
    return v1::Controller::NewStub(grpc::CreateChannel(fmt::format("127.0.0.1:{}", server_->Port()),
                                                       grpc::InsecureChannelCredentials()));
  }

  // A call's context, its deadline ten seconds away.
  static std::unique_ptr<grpc::ClientContext> Call() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return context;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ControllerServer> server_;
  std::thread running_;
  ServerExit end_;
};

}  // namespace cohort::controller::testing
