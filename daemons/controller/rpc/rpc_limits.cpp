// SPDX-License-Identifier: Apache-2.0
#include "rpc/rpc_limits.h"

#include <grpcpp/resource_quota.h>

#include "rpc/request_bounds.h"

namespace cohort::controller {

void LimitRpcServer(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxHeaderBytes);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kIdleConnectionMs);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // One budget for the memory of every connection's reads and calls: past
  // it gRPC reads less and refuses calls rather than grow.
  grpc::ResourceQuota quota("cohort-controller");
  quota.Resize(static_cast<std::size_t>(kRpcMemoryBytes));
  builder.SetResourceQuota(quota);
  // Agents ping every 10 s to notice a controller that vanished; gRPC's
  // default would answer pings that often with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace cohort::controller
