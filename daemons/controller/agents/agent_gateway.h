// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/v1/cohort.grpc.pb.h"
#include "controller.h"
#include "rpc/authenticator.h"
#include "rpc/peer_book.h"

namespace cohort::controller {

/// The AgentGateway service: one bidirectional stream per node. Each stream
/// is an AgentLink the Controller sends through; what the agent sends is
/// posted to the state thread in order, a registration once the
/// Authenticator verified who the agent is (on the stream's thread: munged
/// is asked off the state thread). A refused agent's stream is ended with
/// the reason, and the refusal logged.
class AgentGatewayService final : public v1::AgentGateway::CallbackService {
 public:
  /// `peers` gives the address and the verified certificate names of the
  /// connections the controller accepted itself.
  AgentGatewayService(Controller& controller, const Authenticator& authenticator,
                      const PeerBook& peers)
      : controller_(controller), authenticator_(authenticator), peers_(peers) {}

  grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  Controller& controller_;
  const Authenticator& authenticator_;
  const PeerBook& peers_;
};

/// The host part of a gRPC peer string (`ipv4:10.0.0.5:4711` gives
/// `10.0.0.5`); 127.0.0.1 for local sockets.
[[nodiscard]] std::string PeerHostOf(const std::string& peer);

}  // namespace cohort::controller
