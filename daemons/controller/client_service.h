// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "cohort/v1/cohort.grpc.pb.h"
#include "controller.h"
#include "local_socket.h"

namespace cohort::controller {

/// The Controller service of the wire protocol, for clients. Runs on gRPC's
/// threads: establishes who calls, then hands the call to the Controller's
/// state thread and finishes it from there. Never blocks.
class ClientService final : public v1::Controller::CallbackService {
 public:
  ClientService(Controller& controller, const LocalSocket& local, std::string auth_key);

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::CancelJobResponse* response) override;
  grpc::ServerUnaryReactor* ControlJobs(grpc::CallbackServerContext* context,
                                        const v1::ControlJobsRequest* request,
                                        v1::ControlJobsResponse* response) override;
  grpc::ServerUnaryReactor* ExplainJob(grpc::CallbackServerContext* context,
                                       const v1::ExplainJobRequest* request,
                                       v1::ExplainJobResponse* response) override;
  grpc::ServerUnaryReactor* GetPriorities(grpc::CallbackServerContext* context,
                                          const v1::PriorityRequest* request,
                                          v1::PriorityResponse* response) override;
  grpc::ServerUnaryReactor* GetShares(grpc::CallbackServerContext* context,
                                      const v1::SharesRequest* request,
                                      v1::SharesResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* JobHistory(grpc::CallbackServerContext* context,
                                       const v1::JobHistoryRequest* request,
                                       v1::JobHistoryResponse* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* UpdateNode(grpc::CallbackServerContext* context,
                                       const v1::UpdateNodeRequest* request,
                                       v1::UpdateNodeResponse* response) override;
  grpc::ServerUnaryReactor* GetTopology(grpc::CallbackServerContext* context,
                                        const v1::GetTopologyRequest* request,
                                        v1::GetTopologyResponse* response) override;

 private:
  [[nodiscard]] Identity Identify(const grpc::CallbackServerContext& context) const;

  Controller& controller_;
  const LocalSocket& local_;
  std::string auth_key_;
};

}  // namespace cohort::controller
