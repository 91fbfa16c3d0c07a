// SPDX-License-Identifier: Apache-2.0
// The site's submit policy (job_submit.lua): what a script may change and
// refuse, and what it may not do: fail, loop, eat memory, reach the
// system, or change what it only reads. Each failure leaves the policy
// serving the next submission.
#include "job_submit_policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cohort::policy {
namespace {

class JobSubmitPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char folder[] = "/tmp/cohort-policy.XXXXXX";
    folder_ = ::mkdtemp(folder);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> Load(const std::string& script) {
    const std::string path = folder_ + "/job_submit.lua";
    std::ofstream(path) << script;
    return JobSubmitPolicy::Load(path, [this](int level, std::string_view line) {
      logged_.emplace_back(level, std::string(line));
    });
  }

  static SubmitFields Job() {
    SubmitFields job;
    job.name = "train";
    job.nodes = 2;
    job.tasks_per_node = 4;
    job.gpus_per_node = 8;
    job.user_name = "alice";
    job.user_id = 1000;
    job.work_dir = "/home/alice";
    return job;
  }

  std::vector<PartitionFields> parts_ = {{.name = "gpu",
                                          .nodes = "node[01-16]",
                                          .state = "UP",
                                          .is_default = true,
                                          .max_time_min = 1440,
                                          .default_time_min = std::nullopt,
                                          .max_nodes = 0},
                                         {.name = "short",
                                          .nodes = "node[01-04]",
                                          .state = "UP",
                                          .is_default = false,
                                          .max_time_min = 60,
                                          .default_time_min = 10,
                                          .max_nodes = 4}};
  std::string folder_;
  std::vector<std::pair<int, std::string>> logged_;
};

// The issue's example: a default partition for jobs that name none, and no
// job without a time limit.
constexpr std::string_view kSitePolicy = R"lua(
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.time_limit == slurm.NO_VAL then
    slurm.log_user("give every job a time limit (--time=HH:MM:SS)")
    return slurm.ERROR
  end
  if job_desc.partition == nil then
    for _, part in ipairs(part_list) do
      if part.max_time <= 60 and job_desc.time_limit <= part.max_time then
        job_desc.partition = part.name
      end
    end
  end
  slurm.log_info("job of %s (uid %d) to %s", job_desc.user_name, submit_uid,
                 job_desc.partition or "the default")
  return slurm.SUCCESS
end
)lua";

TEST_F(JobSubmitPolicyTest, ChangesAJobsFieldsAndRefusesWithTheUsersMessage) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(std::string(kSitePolicy));
  ASSERT_TRUE(policy.ok()) << policy.status();
  SubmitFields job = Job();
  const absl::Status refused = (*policy)->Submit(job, parts_, 1000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "give every job a time limit (--time=HH:MM:SS)");
  EXPECT_EQ(job, Job());  // a refused job is left as it was

  job.time_limit_min = 30;
  ASSERT_TRUE((*policy)->Submit(job, parts_, 1000).ok());
  EXPECT_EQ(job.partition, "short");
  ASSERT_FALSE(logged_.empty());
  EXPECT_EQ(logged_.back().second, "job of alice (uid 1000) to short");

  SubmitFields long_job = Job();
  long_job.time_limit_min = 600;
  ASSERT_TRUE((*policy)->Submit(long_job, parts_, 1000).ok());
  EXPECT_TRUE(long_job.partition.empty());  // the default partition's, unchanged
}

TEST_F(JobSubmitPolicyTest, AScriptsErrorNamesItsLineAndTheNextCallIsServed) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(R"lua(
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.name == "bad" then
    local limits = nil
    return limits.max
  end
  return slurm.SUCCESS
end
)lua");
  ASSERT_TRUE(policy.ok()) << policy.status();
  SubmitFields job = Job();
  job.name = "bad";
  const absl::Status failed = (*policy)->Submit(job, parts_, 1000);
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(failed.message().find("job_submit.lua:5: attempt to index a nil value"),
            std::string::npos)
      << failed;
  SubmitFields fine = Job();
  EXPECT_TRUE((*policy)->Submit(fine, parts_, 1000).ok());
}

TEST_F(JobSubmitPolicyTest, ALoopAndAMemoryHogAreStoppedAndSaid) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(R"lua(
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.name == "loop" then while true do end end
  if job_desc.name == "hog" then
    local t = {}
    for i = 1, 1e9 do t[i] = string.rep("x" .. i, 1 << 20) end
  end
  return slurm.SUCCESS
end
)lua");
  ASSERT_TRUE(policy.ok()) << policy.status();
  SubmitFields loop = Job();
  loop.name = "loop";
  const absl::Status looped = (*policy)->Submit(loop, parts_, 1000);
  EXPECT_EQ(looped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(looped.message().find("ran past 200 ms"), std::string::npos) << looped;
  SubmitFields hog = Job();
  hog.name = "hog";
  const absl::Status hogged = (*policy)->Submit(hog, parts_, 1000);
  EXPECT_EQ(hogged.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(hogged.message().find("more than 64 MiB of memory"), std::string::npos) << hogged;
  SubmitFields fine = Job();
  EXPECT_TRUE((*policy)->Submit(fine, parts_, 1000).ok());
}

TEST_F(JobSubmitPolicyTest, TheSandboxHasNoSystemAndNoWayToLoadCode) {
  for (const std::string reach :
       {"os.execute('true')", "io.open('/etc/passwd')", "require('socket')", "load('return 1')()",
        "dofile('/etc/passwd')", "debug.getinfo(1)", "string.dump(print)"}) {
    absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy =
        Load("function slurm_job_submit(j, p, u) " + reach + " return slurm.SUCCESS end");
    ASSERT_TRUE(policy.ok()) << policy.status();
    SubmitFields job = Job();
    const absl::Status reached = (*policy)->Submit(job, parts_, 1000);
    EXPECT_EQ(reached.code(), absl::StatusCode::kFailedPrecondition) << reach;
    EXPECT_NE(reached.message().find("attempt to"), std::string::npos) << reach << ": " << reached;
  }
}

// What runs outside the script's call cannot hang the controller: job_desc
// is read without its metamethods, a value's __tostring is never called,
// and finalizers (which Lua runs with hooks off) are refused.
TEST_F(JobSubmitPolicyTest, MetamethodsAndFinalizersCannotHangTheController) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(R"lua(
local forever = function() while true do end end
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.name == "meta" then setmetatable(job_desc, {__index = forever}) end
  if job_desc.name == "tostring" then
    job_desc.user_name = setmetatable({}, {__tostring = forever})
  end
  if job_desc.name == "gc" then
    for i = 1, 1000 do setmetatable({}, {__gc = forever}) end
  end
  return slurm.SUCCESS
end
)lua");
  ASSERT_TRUE(policy.ok()) << policy.status();
  SubmitFields meta = Job();
  meta.name = "meta";
  EXPECT_TRUE((*policy)->Submit(meta, parts_, 1000).ok());
  EXPECT_TRUE(meta.partition.empty());
  SubmitFields tostring = Job();
  tostring.name = "tostring";
  EXPECT_NE((*policy)
                ->Submit(tostring, parts_, 1000)
                .message()
                .find("job_desc.user_name cannot be changed"),
            std::string::npos);
  SubmitFields gc = Job();
  gc.name = "gc";
  EXPECT_NE((*policy)
                ->Submit(gc, parts_, 1000)
                .message()
                .find("__gc finalizers are not allowed in a submit policy"),
            std::string::npos);
  SubmitFields fine = Job();
  EXPECT_TRUE((*policy)->Submit(fine, parts_, 1000).ok());
}

TEST_F(JobSubmitPolicyTest, WhatItOnlyReadsAndFieldsItDoesNotKnowAreRefused) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(R"lua(
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.name == "steal" then job_desc.user_name = "root" end
  if job_desc.name == "typo" then job_desc.partiton = "gpu" end
  if job_desc.name == "nodes" then job_desc.min_nodes = "four" end
  return slurm.SUCCESS
end
)lua");
  ASSERT_TRUE(policy.ok()) << policy.status();
  for (const auto& [name, said] :
       {std::pair{"steal", "job_desc.user_name cannot be changed"},
        std::pair{"typo", "job_desc.partiton is not a field Cohort knows"},
        std::pair{"nodes", "job_desc.min_nodes must be a whole number"}}) {
    SubmitFields job = Job();
    job.name = name;
    const absl::Status refused = (*policy)->Submit(job, parts_, 1000);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(refused.message().find(said), std::string::npos) << refused;
    EXPECT_EQ(job.name, name);  // nothing of it taken
  }
}

// slurm_job_modify sees only what an update sets (job_desc) beside the job
// (job_rec), and may change it, refuse it, or not be there at all.
TEST_F(JobSubmitPolicyTest, ModifySeesTheUpdateAndMayChangeOrRefuseIt) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> policy = Load(R"lua(
function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if job_desc.partition == "gpu" then
    slurm.log_user("%s's jobs stay out of gpu", job_rec.user_name)
    return slurm.ERROR
  end
  if job_desc.min_nodes ~= slurm.NO_VAL and job_desc.min_nodes > 4 then job_desc.min_nodes = 4 end
  if job_desc.time_limit == slurm.NO_VAL then job_desc.comment = "x" end
  return slurm.SUCCESS
end
)lua");
  ASSERT_TRUE(policy.ok()) << policy.status();
  UpdateFields to_gpu{.partition = "gpu", .time_limit_min = std::nullopt, .nodes = std::nullopt};
  const absl::Status refused = (*policy)->Modify(to_gpu, Job(), parts_, 0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "alice's jobs stay out of gpu");
  UpdateFields longer{.partition = std::nullopt, .time_limit_min = 120, .nodes = std::nullopt};
  const absl::Status lengthened = (*policy)->Modify(longer, Job(), parts_, 0);
  EXPECT_TRUE(lengthened.ok()) << lengthened;
  EXPECT_EQ(longer.time_limit_min, std::optional<std::int64_t>(120));
  EXPECT_EQ(longer.nodes, std::nullopt);
  UpdateFields bigger{.partition = std::nullopt, .time_limit_min = 30, .nodes = 16};
  ASSERT_TRUE((*policy)->Modify(bigger, Job(), parts_, 0).ok());
  EXPECT_EQ(bigger, (UpdateFields{.partition = std::nullopt, .time_limit_min = 30, .nodes = 4}));
  UpdateFields comment{.partition = "short", .time_limit_min = std::nullopt, .nodes = std::nullopt};
  const absl::Status not_updatable = (*policy)->Modify(comment, Job(), parts_, 0);
  EXPECT_EQ(not_updatable.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(not_updatable.message().find("job_desc.comment cannot be set in an update"),
            std::string::npos)
      << not_updatable;

  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> submit_only =
      Load("function slurm_job_submit(j, p, u) return slurm.SUCCESS end");
  ASSERT_TRUE(submit_only.ok()) << submit_only.status();
  UpdateFields any{.partition = "gpu", .time_limit_min = 5, .nodes = 1};
  EXPECT_TRUE((*submit_only)->Modify(any, Job(), parts_, 0).ok());
  EXPECT_EQ(any.partition, std::optional<std::string>("gpu"));
}

TEST_F(JobSubmitPolicyTest, AScriptThatCannotLoadSaysWhere) {
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> broken =
      Load("function slurm_job_submit(j, p, u)\n  return slurm.SUCCESS\n");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("job_submit.lua:3:"), std::string::npos)
      << broken.status();
  absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> none = Load("x = 1\n");
  EXPECT_NE(none.status().message().find("defines no function slurm_job_submit"), std::string::npos)
      << none.status();
  EXPECT_EQ(JobSubmitPolicy::Load(folder_ + "/missing.lua").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::policy
