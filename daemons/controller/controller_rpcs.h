// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

/// The unary calls of the Controller service, one line each:
/// X(method, request type, response type, the part of the controller that
/// serves it, whether it needs the caller's identity). This one list
/// generates the gRPC service's handlers (ClientService) and the
/// Controller's entry points that post each call to where its part runs;
/// a new call is a line here and a member of its part. WatchJob, a stream,
/// is written out by hand.
#define COHORT_CONTROLLER_RPCS(X)                                                      \
  X(SubmitJob, SubmitJobRequest, SubmitJobResponse, JobRpcs, kNeeded)                  \
  X(CancelJob, CancelJobRequest, CancelJobResponse, JobRpcs, kNeeded)                  \
  X(GetJob, GetJobRequest, GetJobResponse, JobRpcs, kNeeded)                           \
  X(ListJobs, ListJobsRequest, ListJobsResponse, JobRpcs, kNeeded)                     \
  X(ControlJobs, ControlJobsRequest, ControlJobsResponse, JobRpcs, kNeeded)            \
  X(ExplainJob, ExplainJobRequest, ExplainJobResponse, JobRpcs, kUnused)               \
  X(JobHistory, JobHistoryRequest, JobHistoryResponse, HistoryRpcs, kNeeded)           \
  X(ListNodes, ListNodesRequest, ListNodesResponse, NodeRpcs, kUnused)                 \
  X(UpdateNode, UpdateNodeRequest, UpdateNodeResponse, NodeRpcs, kNeeded)              \
  X(GetTopology, GetTopologyRequest, GetTopologyResponse, NodeRpcs, kUnused)           \
  X(GetPriorities, PriorityRequest, PriorityResponse, PriorityRpcs, kUnused)           \
  X(GetShares, SharesRequest, SharesResponse, PriorityRpcs, kUnused)

namespace cohort::controller {

/// Whether a call needs to know who calls. Establishing it looks the uid's
/// login name up (NSS), so calls that do not use it skip it and get an
/// anonymous caller.
enum class CallerIdentity : std::uint8_t { kNeeded, kUnused };

}  // namespace cohort::controller
