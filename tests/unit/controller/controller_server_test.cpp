// SPDX-License-Identifier: Apache-2.0
// The controller service as cohort-controller runs it (ControllerServer),
// in this process on port 0: it serves a real gRPC client over its local
// socket and its TCP port, and stops in order when told.
#include "controller_server.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cohort/v1/cohort.grpc.pb.h"

namespace cohort::controller {
namespace {

class ControllerServerTest : public ::testing::Test {
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
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ServerFlags Flags() const {
    ServerFlags flags;
    flags.config_path = (dir_ / "cohort.conf").string();
    flags.listen = "127.0.0.1";
    flags.port = 0;
    flags.log_level = "warn";
    return flags;
  }

  std::filesystem::path dir_;
};

// Neither test fails a commit or loses a lease, so a run always returns.
void NeverCalled(const ServerExit& end) {
  std::cerr << "the server left at once (status " << end.status << ", again: '" << end.again_because
            << "')\n";
  std::_Exit(2);
}

// Waits (a bounded while) until the server listens on its TCP port.
bool Serving(const ControllerServer& server) {
  for (int i = 0; i < 500 && server.Port() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return server.Port() != 0;
}

TEST_F(ControllerServerTest, ServesOnPortZeroAndStopsInOrderWhenTold) {
  ControllerServer server(Flags(), NeverCalled);
  ServerExit end;
  std::thread running([&] { end = server.Run(); });
  ASSERT_TRUE(Serving(server)) << "the server did not start";

  // A user on this host, over the local socket: the call is answered.
  auto local = v1::Controller::NewStub(grpc::CreateChannel(
      "unix:" + (dir_ / "state" / "cohort.sock").string(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListNodesRequest request;
  v1::ListNodesResponse nodes;
  const grpc::Status listed = local->ListNodes(&context, request, &nodes);
  EXPECT_TRUE(listed.ok()) << listed.error_message();
  EXPECT_EQ(nodes.nodes_size(), 2);

  // And over TCP on the port it chose (anonymous, as AuthType=none makes a
  // TCP caller): still answered.
  auto tcp = v1::Controller::NewStub(grpc::CreateChannel(fmt::format("127.0.0.1:{}", server.Port()),
                                                         grpc::InsecureChannelCredentials()));
  grpc::ClientContext over_tcp;
  over_tcp.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListNodesResponse again;
  EXPECT_TRUE(tcp->ListNodes(&over_tcp, request, &again).ok());

  server.Stop();
  running.join();
  EXPECT_EQ(end.status, 0);
  EXPECT_TRUE(end.again_because.empty());
  grpc::ClientContext after;
  after.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_FALSE(local->ListNodes(&after, request, &nodes).ok()) << "a stopped server answers";
}

TEST_F(ControllerServerTest, AConfigurationItCannotUseKeepsItFromStarting) {
  std::ofstream(dir_ / "cohort.conf", std::ios::app) << "PartitionName=all Nodes=n9\n";
  ControllerServer server(Flags(), NeverCalled);
  const ServerExit end = server.Run();
  EXPECT_EQ(end.status, 1);
  EXPECT_EQ(server.Port(), 0);
}

}  // namespace
}  // namespace cohort::controller
