// SPDX-License-Identifier: Apache-2.0
// Images pulled ahead, over a real engine: a pending job with an image
// whose start is planned within ContainerPullAhead= has PrepareImage sent
// to each planned node once; the answers make its status; a failure is
// asked again after a while, an unreachable node at the next review; a job
// that starts is forgotten, and one planned too far ahead is not asked.
#include "agents/image_prefetch.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "controller/controller_test_support.h"

namespace cohort::controller {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

class ImagePrefetchTest : public ::testing::Test {
 protected:
  ImagePrefetchTest()
      : state_(testing::OneLeafState(2)),
        prefetch_(*state_, [this](NodeId node, v1::ControllerMessage message) {
          if (unreachable_.contains(node)) return false;
          sent_.emplace_back(node, message.prepare_image());
          return true;
        }) {
    // Both nodes' agents registered: the nodes are up.
    for (NodeId node = 0; node < 2; ++node) {
      NodeReport report;
      report.cpus = 64;
      report.memory_mb = 1024 * 1024;
      report.gpus = 8;
      Effects effects;
      (void)state_->engine.NodeRegistered(node, report, now_, effects);
    }
  }

  JobId Submit(const std::string& image) {
    JobRequest r;
    r.name = "train";
    r.user_name = "alice";
    r.uid = 1000;
    r.nodes = 2;
    r.tasks_per_node = 1;
    r.gpus_per_node = 8;  // every GPU: one job a node
    Effects effects;
    absl::StatusOr<JobId> id = state_->engine.Submit(r, now_, effects);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return 0;
    if (!image.empty()) state_->specs[*id].mutable_container()->set_image(image);
    prefetch_.Changed(effects.changed_jobs);
    Schedule();
    return *id;
  }
  // A pass; a job that waits gets its reservation (and planned nodes) from
  // a full pass, which the engine runs while jobs wait, every 30 s.
  void Schedule() {
    for (int pass = 0; pass < 2; ++pass) {
      Effects effects;
      for (NodeId node = 0; node < 2; ++node) state_->engine.NodeHeartbeat(node, now_);
      state_->engine.Tick(now_, effects);
      state_->engine.Schedule(now_, effects);
      prefetch_.Changed(effects.changed_jobs);
      now_ += std::chrono::seconds(31);
    }
  }
  [[nodiscard]] std::string Status(JobId id) const {
    const auto it = state_->image_status.find(id);
    return it == state_->image_status.end() ? "" : it->second;
  }
  static v1::ImagePrepared Answer(JobId id, const std::string& image, bool ok,
                                  const std::string& error = "") {
    v1::ImagePrepared prepared;
    prepared.set_job_id(id);
    prepared.set_image(image);
    prepared.set_ok(ok);
    prepared.set_error(error);
    if (ok) prepared.set_digest("sha256:0123");
    return prepared;
  }

  std::unique_ptr<ControllerState> state_;
  std::vector<std::pair<NodeId, v1::PrepareImage>> sent_;
  std::set<NodeId> unreachable_;
  Millis now_ = ControllerState::Now();
  ImagePrefetch prefetch_;
};

TEST(ImageStatusLineTest, SaysHowManyNodesAreReadyOrWhatFailed) {
  EXPECT_EQ(ImageStatusLine(3, 8, {}), "pulling image: 3 of 8 nodes ready");
  EXPECT_EQ(ImageStatusLine(8, 8, {}), "image ready on its 8 planned nodes");
  EXPECT_EQ(ImageStatusLine(1, 1, {}), "image ready on its 1 planned node");
  EXPECT_EQ(ImageStatusLine(1, 4, {{"n002", "manifest unknown"}, {"n003", "x"}}),
            "image pull ahead failed on n002 and 1 more: manifest unknown; it is tried again, "
            "and at the start (1 of 4 planned nodes ready)");
}

TEST_F(ImagePrefetchTest, AsksEachPlannedNodeOnceAndTellsWhatTheyAnswered) {
  const JobId running = Submit("");
  ASSERT_EQ(state_->engine.FindJob(running)->state, JobState::kRunning);
  const JobId waiting = Submit("reg#tiny:1");
  const Job& job = *state_->engine.FindJob(waiting);
  ASSERT_EQ(job.state, JobState::kPending);
  ASSERT_EQ(job.cache.planned_nodes.size(), 2U);
  EXPECT_EQ(prefetch_.Followed(), 1U);

  prefetch_.Review(now_);
  ASSERT_EQ(sent_.size(), 2U);
  for (const auto& [node, prepare] : sent_) {
    EXPECT_EQ(prepare.job_id(), waiting);
    EXPECT_EQ(prepare.uid(), 1000U);
    EXPECT_EQ(prepare.image(), "reg#tiny:1");
  }
  EXPECT_EQ(Status(waiting), "pulling image: 0 of 2 nodes ready");
  prefetch_.Review(now_ + minutes(1));
  EXPECT_EQ(sent_.size(), 2U) << "each node is asked once while it pulls";

  prefetch_.OnPrepared(sent_[0].first, Answer(waiting, "reg#tiny:1", true), now_);
  // An answer about another image, or from a node not asked, changes nothing.
  prefetch_.OnPrepared(sent_[1].first, Answer(waiting, "reg#other:1", true), now_);
  prefetch_.Review(now_);
  EXPECT_EQ(Status(waiting), "pulling image: 1 of 2 nodes ready");

  prefetch_.OnPrepared(sent_[1].first,
                       Answer(waiting, "reg#tiny:1", false, "reg#tiny:1: manifest unknown"), now_);
  prefetch_.Review(now_);
  const std::string failed = Status(waiting);
  EXPECT_NE(failed.find("failed on " + state_->topology->NodeName(sent_[1].first)),
            std::string::npos)
      << failed;
  EXPECT_NE(failed.find("manifest unknown"), std::string::npos) << failed;
  EXPECT_EQ(sent_.size(), 2U);
  // A failure is asked again after a while, of the node that failed alone.
  prefetch_.Review(now_ + ImagePrefetch::kRetryAfter);
  ASSERT_EQ(sent_.size(), 3U);
  EXPECT_EQ(sent_[2].first, sent_[1].first);
  prefetch_.OnPrepared(sent_[2].first, Answer(waiting, "reg#tiny:1", true), now_);
  prefetch_.Review(now_ + ImagePrefetch::kRetryAfter);
  EXPECT_EQ(Status(waiting), "image ready on its 2 planned nodes");

  // It leaves the queue: forgotten, with its status.
  Effects effects;
  ASSERT_TRUE(state_->engine.Cancel(JobRef{waiting, -1}, 0, Caller{.uid = 0}, now_, effects).ok());
  prefetch_.Review(now_);
  EXPECT_EQ(prefetch_.Followed(), 0U);
  EXPECT_EQ(Status(waiting), "");
}

TEST_F(ImagePrefetchTest, AsksAnUnreachableNodeAgainAtTheNextReview) {
  Submit("");
  const JobId waiting = Submit("reg#tiny:1");
  const std::vector<NodeId> planned = state_->engine.FindJob(waiting)->cache.planned_nodes;
  ASSERT_EQ(planned.size(), 2U);
  unreachable_.insert(planned[0]);
  prefetch_.Review(now_);
  ASSERT_EQ(sent_.size(), 1U);
  EXPECT_EQ(sent_[0].first, planned[1]);
  unreachable_.clear();
  prefetch_.Review(now_);
  ASSERT_EQ(sent_.size(), 2U);
  EXPECT_EQ(sent_[1].first, planned[0]);
}

TEST_F(ImagePrefetchTest, LeavesJobsPlannedBeyondTheWindowAndJobsWithoutAnImage) {
  state_->config.container_pull_ahead = minutes(30);  // the running job holds the nodes 1 h
  Submit("");
  const JobId waiting = Submit("reg#tiny:1");
  const JobId bare = Submit("");
  ASSERT_FALSE(state_->engine.FindJob(waiting)->cache.planned_nodes.empty());
  EXPECT_EQ(prefetch_.Followed(), 1U) << "only the job with an image is followed";
  prefetch_.Review(now_);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(Status(waiting), "");
  prefetch_.Review(now_ + minutes(31));
  EXPECT_EQ(sent_.size(), 2U) << "within the window";
  EXPECT_EQ(Status(bare), "");
}

}  // namespace
}  // namespace cohort::controller
