// SPDX-License-Identifier: Apache-2.0
#pragma once

/// The unary calls of the Controller service (cohort.proto), one line each:
/// X(method, request message, response message, area, caller), where
/// `area` groups the calls by what they work on (Job, History, Node,
/// Priority, Admin) and `caller` says whether the answer depends on who asks
/// (kNeeded) or not (kUnused). This one list generates the controller's
/// gRPC handlers and entry points (daemons/controller: each area is served
/// by its part, AreaRpcs) and the CLI's client calls (cli/controller_client).
/// A new call is a line here, a member of its part and an rpc in
/// cohort.proto. WatchJob, a stream, is written out by hand on both sides.
#define COHORT_CONTROLLER_RPCS(X)                                                           \
  X(SubmitJob, SubmitJobRequest, SubmitJobResponse, Job, kNeeded)                           \
  X(CancelJob, CancelJobRequest, CancelJobResponse, Job, kNeeded)                           \
  X(GetJob, GetJobRequest, GetJobResponse, Job, kNeeded)                                    \
  X(GetJobUsage, JobUsageRequest, JobUsageResponse, Job, kNeeded)                           \
  X(ListJobs, ListJobsRequest, ListJobsResponse, Job, kNeeded)                              \
  X(ControlJobs, ControlJobsRequest, ControlJobsResponse, Job, kNeeded)                     \
  X(UpdateJob, UpdateJobRequest, UpdateJobResponse, Job, kNeeded)                           \
  X(ExplainJob, ExplainJobRequest, ExplainJobResponse, Job, kNeeded)                        \
  X(StartStep, StartStepRequest, StartStepResponse, Job, kNeeded)                           \
  X(SignalStep, SignalStepRequest, SignalStepResponse, Job, kNeeded)                        \
  X(JobHistory, JobHistoryRequest, JobHistoryResponse, History, kNeeded)                    \
  X(ListNodes, ListNodesRequest, ListNodesResponse, Node, kUnused)                          \
  X(ListPartitions, ListPartitionsRequest, ListPartitionsResponse, Node, kUnused)           \
  X(UpdateNode, UpdateNodeRequest, UpdateNodeResponse, Node, kNeeded)                       \
  X(UpdatePartition, UpdatePartitionRequest, UpdatePartitionResponse, Node, kNeeded)        \
  X(GetTopology, GetTopologyRequest, GetTopologyResponse, Node, kUnused)                    \
  X(GetPriorities, PriorityRequest, PriorityResponse, Priority, kNeeded)                    \
  X(GetShares, SharesRequest, SharesResponse, Priority, kNeeded)                            \
  X(ListAccounts, ListAccountsRequest, ListAccountsResponse, Priority, kUnused)             \
  X(UpdateAccounts, UpdateAccountsRequest, UpdateAccountsResponse, Priority, kNeeded)       \
  X(ListTransactions, ListTransactionsRequest, ListTransactionsResponse, Priority, kUnused) \
  X(ListReservations, ListReservationsRequest, ListReservationsResponse, Node, kUnused)     \
  X(UpdateReservation, UpdateReservationRequest, UpdateReservationResponse, Node, kNeeded)  \
  X(IssueToken, IssueTokenRequest, IssueTokenResponse, Admin, kNeeded)                      \
  X(Reconfigure, ReconfigureRequest, ReconfigureResponse, Admin, kNeeded)                   \
  X(Ping, PingRequest, PingResponse, Admin, kUnused)                                        \
  X(GetConfig, GetConfigRequest, GetConfigResponse, Admin, kUnused)
