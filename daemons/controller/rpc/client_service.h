// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "cohort/v1/cohort.grpc.pb.h"
#include "cohort/v1/controller_rpcs.h"
#include "controller.h"
#include "rpc/authenticator.h"
#include "rpc/peer_book.h"

namespace cohort::controller {

/// Whether a call needs to know who calls (the `caller` column of
/// controller_rpcs.h). Establishing it looks the uid's login name up
/// (NSS), so calls whose answer is the same for anyone skip it.
enum class CallerIdentity : std::uint8_t { kNeeded, kUnused };

/// The Controller service of the wire protocol, for clients. Runs on gRPC's
/// threads: establishes who calls (over TCP munged decodes the caller's
/// credential, a fraction of a millisecond), then hands the call to the
/// Controller's state thread and finishes it from there.
class ClientService final : public v1::Controller::CallbackService {
 public:
  /// `peers` says who is behind the connections the controller accepted
  /// itself: a local uid, or a TCP client that proves itself by MUNGE.
  ClientService(Controller& controller, const PeerBook& peers, const Authenticator& authenticator);

  // One handler per unary call of cohort/v1/controller_rpcs.h: establishes
  // who calls (where the call needs it) and hands the call to the Controller.
#define COHORT_CLIENT_SERVICE_DECLARE_RPC(Method, Request, Response, Area, Caller) \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* context,           \
                                   const v1::Request* request, v1::Response* response) override;
  COHORT_CONTROLLER_RPCS(COHORT_CLIENT_SERVICE_DECLARE_RPC)
#undef COHORT_CLIENT_SERVICE_DECLARE_RPC

  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;

 private:
  [[nodiscard]] Identity Identify(const grpc::CallbackServerContext& context) const;
  /// Hands the call to the controller, the request moved out of gRPC's
  /// holder of it (not copied: a job's spec carries its environment).
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, const Request& request,
                                  Response* response, std::string_view name, CallerIdentity caller,
                                  void (Controller::*method)(Request, Identity, Reply<Response>));

  Controller& controller_;
  const PeerBook& peers_;
  const Authenticator& authenticator_;
};

}  // namespace cohort::controller
