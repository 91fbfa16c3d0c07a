// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>

#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's calls on nodes and the topology: list nodes,
/// drain or resume them, the switch tree with what each switch holds. On
/// the state thread (io()), answered through the outbox. Errors:
/// InvalidArgument (a malformed hostlist or action), NotFound (no such
/// node), PermissionDenied (anonymous callers, or users, changing nodes).
class NodeRpcs {
 public:
  NodeRpcs(boost::asio::io_context& state_io, ControllerState& state, Outbox& outbox,
           EffectSink& sink)
      : io_(state_io), state_(state), outbox_(outbox), sink_(sink) {}

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  void ListNodes(v1::ListNodesRequest& request, const Identity& who,
                 Reply<v1::ListNodesResponse> reply);
  /// The partitions of cohort.conf with their nodes' totals; NotFound for
  /// a name that is none.
  void ListPartitions(v1::ListPartitionsRequest& request, const Identity& who,
                      Reply<v1::ListPartitionsResponse> reply);
  /// Drains or resumes every node named; stops at the first failure (the
  /// nodes before it keep their change).
  void UpdateNode(v1::UpdateNodeRequest& request, const Identity& who,
                  Reply<v1::UpdateNodeResponse> reply);
  void UpdatePartition(v1::UpdatePartitionRequest& request, const Identity& who,
                       Reply<v1::UpdatePartitionResponse> reply);
  /// Operators' reservations, by start.
  void ListReservations(v1::ListReservationsRequest& request, const Identity& who,
                        Reply<v1::ListReservationsResponse> reply);
  /// scontrol create|update|delete reservation: root and Operators= only;
  /// committed before the answer.
  void UpdateReservation(v1::UpdateReservationRequest& request, const Identity& who,
                         Reply<v1::UpdateReservationResponse> reply);
  void GetTopology(v1::GetTopologyRequest& request, const Identity& who,
                   Reply<v1::GetTopologyResponse> reply);

 private:
  [[nodiscard]] absl::StatusOr<std::vector<NodeId>> Resolve(const std::string& hostlist) const;
  void NodeToWire(NodeId node, v1::Node* out) const;

  boost::asio::io_context& io_;
  ControllerState& state_;
  Outbox& outbox_;
  EffectSink& sink_;
};

}  // namespace cohort::controller
