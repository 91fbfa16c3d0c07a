// SPDX-License-Identifier: Apache-2.0
// The controller service as cohort-controller runs it (ControllerServer),
// in this process on port 0: it serves a real gRPC client over its local
// socket and its TCP port, and stops in order when told.
#include <chrono>
#include <fstream>

#include "server_fixture.h"

namespace cohort::controller {
namespace {

using ControllerServerTest = testing::ServerTest;
using testing::NeverCalled;

TEST_F(ControllerServerTest, ServesOnPortZeroAndStopsInOrderWhenTold) {
  ASSERT_TRUE(Serve()) << "the server did not start";

  // A user on this host, over the local socket: the call is answered.
  auto local = Local();
  v1::ListNodesRequest request;
  v1::ListNodesResponse nodes;
  const grpc::Status listed = local->ListNodes(Call().get(), request, &nodes);
  EXPECT_TRUE(listed.ok()) << listed.error_message();
  EXPECT_EQ(nodes.nodes_size(), 2);

  // And over TCP on the port it chose (anonymous, as AuthType=none makes a
  // TCP caller): still answered.
  v1::ListNodesResponse again;
  EXPECT_TRUE(OverTcp()->ListNodes(Call().get(), request, &again).ok());

  server_->Stop();
  running_.join();
  server_.reset();
  EXPECT_EQ(end_.status, 0);
  EXPECT_TRUE(end_.again_because.empty());
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
