// SPDX-License-Identifier: Apache-2.0
// The controller's RPC handlers in this process, through a real gRPC
// client: a job's round trip (submit, read, list, cancel), a request past a
// bound, and a caller who is not the owner.
#include <unistd.h>

#include <chrono>
#include <string>

#include "server_fixture.h"

namespace cohort::controller {
namespace {

using RpcHandlersTest = testing::ServerTest;

v1::SubmitJobRequest OneNodeJob() {
  v1::SubmitJobRequest request;
  v1::JobSpec& spec = *request.mutable_spec();
  spec.set_name("train");
  spec.set_nodes(1);
  spec.add_argv("/bin/true");
  return request;
}

v1::Job JobOf(v1::Controller::Stub& stub, std::int64_t id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::GetJobResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status status = stub.GetJob(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.job();
}

TEST_F(RpcHandlersTest, AJobIsSubmittedReadListedAndCancelledByItsOwner) {
  ASSERT_TRUE(Serve());
  auto local = Local();
  v1::SubmitJobResponse submitted;
  const grpc::Status status = local->SubmitJob(Call().get(), OneNodeJob(), &submitted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(submitted.job_id(), 1);

  // No agent has registered: the job waits, owned by the caller's uid.
  v1::Job job = JobOf(*local, submitted.job_id());
  EXPECT_EQ(job.state(), v1::JOB_PENDING);
  EXPECT_EQ(job.uid(), ::getuid());
  EXPECT_EQ(job.spec().name(), "train");
  ASSERT_EQ(job.spec().argv_size(), 1);
  EXPECT_EQ(job.spec().argv(0), "/bin/true");

  v1::ListJobsResponse listed;
  ASSERT_TRUE(local->ListJobs(Call().get(), v1::ListJobsRequest(), &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), submitted.job_id());

  v1::CancelJobRequest cancel;
  cancel.add_job_ids(submitted.job_id());
  v1::CancelJobResponse cancelled;
  const grpc::Status answered = local->CancelJob(Call().get(), cancel, &cancelled);
  ASSERT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_EQ(JobOf(*local, submitted.job_id()).state(), v1::JOB_CANCELLED);
}

TEST_F(RpcHandlersTest, ARequestPastABoundIsRefusedNamingItAndNothingIsQueued) {
  ASSERT_TRUE(Serve());
  auto local = Local();
  v1::SubmitJobRequest request = OneNodeJob();
  request.mutable_spec()->set_name(std::string(300, 'x'));
  v1::SubmitJobResponse submitted;
  const grpc::Status status = local->SubmitJob(Call().get(), request, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("name"), std::string::npos) << status.error_message();

  v1::ListJobsRequest all;
  all.set_all_users(true);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(local->ListJobs(Call().get(), all, &listed).ok()) << "the controller still serves";
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(RpcHandlersTest, AnAnonymousCallerCannotCancelAnothersJob) {
  ASSERT_TRUE(Serve());
  auto local = Local();
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(local->SubmitJob(Call().get(), OneNodeJob(), &submitted).ok());

  v1::CancelJobRequest cancel;
  cancel.add_job_ids(submitted.job_id());
  v1::CancelJobResponse cancelled;
  const grpc::Status status = OverTcp()->CancelJob(Call().get(), cancel, &cancelled);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(JobOf(*local, submitted.job_id()).state(), v1::JOB_PENDING);
}

}  // namespace
}  // namespace cohort::controller
