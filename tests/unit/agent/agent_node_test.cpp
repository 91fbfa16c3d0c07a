// SPDX-License-Identifier: Apache-2.0
// AgentNode alone: a link that records what the node sends and lets the
// test speak as the controller, and either the fake runner (the real code
// of --fake-exec: timers, no process) or a runner that records its orders.
#include "agent_node.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/launch/node_layout.h"
#include "fake_runner.h"

namespace cohort::agent {
namespace {

// The controller's side of the node's stream.
class RecordingLink final : public NodeLink {
 public:
  explicit RecordingLink(Hooks hooks) : hooks_(std::move(hooks)) {}
  void Start() override { ++starts; }
  void Send(v1::AgentMessage event) override { sent.push_back(std::move(event)); }
  void Stop(std::function<void()> on_stopped) override {
    ++stops;
    on_stopped();
  }
  // What the controller would read when the node registers.
  v1::Register Register() const { return hooks_.make_register(); }
  void Deliver(const v1::ControllerMessage& message) const { hooks_.on_message(message); }
  // No controller heard for NodeTimeout.
  void Silence() const { hooks_.on_fence(); }

  int starts = 0;
  int stops = 0;
  std::vector<v1::AgentMessage> sent;

 private:
  Hooks hooks_;
};

// Records the orders the node passes on, and the calls around them.
class RecordingRunner final : public LaunchRunner {
 public:
  explicit RecordingRunner(std::vector<std::string>& calls) : calls_(calls) {}
  void Start() override { calls_.push_back("runner start"); }
  void Launch(const v1::Launch& launch) override {
    calls_.push_back("launch " + std::to_string(launch.job_id()));
  }
  void Signal(const v1::Signal& signal) override {
    calls_.push_back("signal " + std::to_string(signal.signal()));
  }
  void Terminate(const v1::Terminate& terminate) override {
    calls_.push_back("terminate " + std::to_string(terminate.job_id()));
  }
  void PrepareImage(const v1::PrepareImage& prepare) override {
    calls_.push_back("image " + prepare.image());
  }
  void AddTo(v1::Register& message) const override { message.add_running()->set_job_id(77); }
  void Poll() override { calls_.push_back("poll"); }
  void OnStepNotice(step::LaunchId id) override {
    calls_.push_back("notice " + std::to_string(id.job_id));
  }
  void Stop() override { calls_.push_back("runner stop"); }
  void Fence() override { calls_.push_back("fence"); }
  [[nodiscard]] std::size_t LiveRanks() const override { return 3; }
  void AddMetrics(NodeMetrics& metrics) const override {
    metrics.launches_started += 5;
    metrics.gpus_allocated |= 0b11;
  }

 private:
  std::vector<std::string>& calls_;
};

class AgentNodeTest : public ::testing::Test {
 protected:
  AgentNodeTest() {
    environment_.auth_type = config::AuthType::kNone;
    environment_.auth_key = "the cluster's key";
    setup_.name = "gpu07";
    setup_.resources = {
        .cpus = 8, .memory_mb = 4096, .gpus = 2, .gpu_groups = {0x1, 0x2}, .nvlink_domain = "u/3"};
    setup_.layout = layout::ApproximateLayout(8, 4096, 2, {});
  }

  // The node's parts: a recording link, and the runner `runner` makes.
  NodeParts Parts(
      std::function<std::unique_ptr<LaunchRunner>(const NodeSetup&, SendToController)> runner) {
    NodeParts parts;
    parts.link = [this](NodeLink::Hooks hooks) {
      auto made = std::make_unique<RecordingLink>(std::move(hooks));
      link_ = made.get();
      return made;
    };
    parts.runner = std::move(runner);
    return parts;
  }

  static v1::ControllerMessage LaunchOf(std::int64_t job_id, int tasks) {
    v1::ControllerMessage message;
    v1::Launch& launch = *message.mutable_launch();
    launch.set_job_id(job_id);
    launch.set_attempt(0);
    launch.set_num_nodes(1);
    launch.set_tasks_per_node(tasks);
    launch.mutable_spec()->add_argv("true");
    return message;
  }

  boost::asio::io_context loop_;
  NodeEnvironment environment_;
  NodeSetup setup_;
  RecordingLink* link_ = nullptr;
  std::vector<std::string> calls_;
};

TEST_F(AgentNodeTest, RegistersItsNameResourcesKeyAndWhatItsRunnerHolds) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup&, SendToController) {
                   return std::make_unique<RecordingRunner>(calls_);
                 }));
  node.Start();
  ASSERT_NE(link_, nullptr);
  EXPECT_EQ(link_->starts, 1);
  // The runner takes on what an earlier agent left before the first stream.
  EXPECT_EQ(calls_, std::vector<std::string>{"runner start"});

  const v1::Register registered = link_->Register();
  EXPECT_EQ(registered.node_name(), "gpu07");
  EXPECT_EQ(registered.protocol_version(), 1U);
  EXPECT_EQ(registered.auth_key(), "the cluster's key");
  EXPECT_TRUE(registered.credential().empty());
  EXPECT_EQ(registered.resources().cpus(), 8);
  EXPECT_EQ(registered.resources().memory_mb(), 4096);
  EXPECT_EQ(registered.resources().gpus(), 2);
  // The GPUs' locality groups and NVLink domain reach the controller.
  EXPECT_EQ(std::vector<std::uint64_t>(registered.resources().gpu_groups().begin(),
                                       registered.resources().gpu_groups().end()),
            (std::vector<std::uint64_t>{0x1, 0x2}));
  EXPECT_EQ(registered.resources().nvlink_domain(), "u/3");
  ASSERT_EQ(registered.running_size(), 1);
  EXPECT_EQ(registered.running(0).job_id(), 77);
}

TEST_F(AgentNodeTest, PassesTheControllersOrdersToItsRunnerInOrderAndIgnoresTheRest) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup&, SendToController) {
                   return std::make_unique<RecordingRunner>(calls_);
                 }));
  node.Start();
  calls_.clear();
  v1::ControllerMessage signal;
  signal.mutable_signal()->set_job_id(4);
  signal.mutable_signal()->set_signal(SIGUSR1);
  v1::ControllerMessage terminate;
  terminate.mutable_terminate()->set_job_id(4);
  v1::ControllerMessage registered;
  registered.mutable_registered();
  v1::ControllerMessage prepare;
  prepare.mutable_prepare_image()->set_image("reg#tiny:1");
  link_->Deliver(LaunchOf(4, 1));
  link_->Deliver(signal);
  link_->Deliver(registered);               // the link's own business
  link_->Deliver(v1::ControllerMessage());  // nothing set
  link_->Deliver(terminate);
  link_->Deliver(prepare);
  node.OnStepNotice(step::LaunchId{4, 0, step::kOwnLaunch});
  node.Poll();
  EXPECT_EQ(calls_,
            (std::vector<std::string>{"launch 4", "signal " + std::to_string(SIGUSR1),
                                      "terminate 4", "image reg#tiny:1", "notice 4", "poll"}));
  EXPECT_TRUE(link_->sent.empty());

  bool stopped = false;
  node.Stop([&] { stopped = true; });
  EXPECT_TRUE(stopped);
  EXPECT_EQ(link_->stops, 1);
  EXPECT_EQ(calls_.back(), "runner stop");
}

TEST_F(AgentNodeTest, ItsMetricsAreItsOwnAndItsRunners) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup&, SendToController) {
                   return std::make_unique<RecordingRunner>(calls_);
                 }));
  const NodeMetrics metrics = node.Metrics();
  EXPECT_EQ(metrics.node, "gpu07");
  EXPECT_EQ(metrics.gpus, 2);
  EXPECT_EQ(metrics.live_ranks, 3U);
  EXPECT_EQ(metrics.launches_started, 5U);
  EXPECT_EQ(metrics.gpus_allocated, 0b11U);
  EXPECT_EQ(node.LiveRanks(), 3U);
}

TEST_F(AgentNodeTest, AHealthVerdictGoesToTheController) {
  HealthCheck::Verdict verdict;
  NodeParts parts = Parts([&](const NodeSetup&, SendToController) {
    return std::make_unique<RecordingRunner>(calls_);
  });
  parts.health = [&](HealthCheck::Verdict on_verdict) {
    verdict = std::move(on_verdict);
    return std::unique_ptr<HealthCheck>();
  };
  AgentNode node(environment_, setup_, parts);
  EXPECT_FALSE(verdict) << "the check starts with the node, not before";
  node.Start();
  ASSERT_TRUE(verdict);
  verdict(false, "/scratch is full");
  ASSERT_EQ(link_->sent.size(), 1U);
  ASSERT_TRUE(link_->sent[0].has_health());
  EXPECT_FALSE(link_->sent[0].health().healthy());
  EXPECT_EQ(link_->sent[0].health().reason(), "/scratch is full");
}

// The fake runner behind the node, as --fake-exec runs it: a launch is
// started, bound on the node's layout, ends, and the node is released;
// a registration in between lists it as running.
TEST_F(AgentNodeTest, AFakeLaunchRunsEndsAndReleasesTheNodeThroughTheLink) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup& own, SendToController send) {
                   return std::make_unique<FakeRunner>(loop_, own, std::move(send));
                 }));
  node.Start();
  v1::ControllerMessage launch = LaunchOf(9, 2);
  auto* env = launch.mutable_launch()->mutable_spec()->add_env();
  env->set_name("COHORT_FAKE_RUNTIME");
  env->set_value("0.05");
  launch.mutable_launch()->set_gpus(0b11);
  link_->Deliver(launch);
  ASSERT_EQ(link_->sent.size(), 1U);
  const v1::RanksStarted& started = link_->sent[0].ranks_started();
  EXPECT_EQ(started.job_id(), 9);
  EXPECT_EQ(started.ranks_size(), 2);
  ASSERT_EQ(started.bindings_size(), 2) << "the fake ranks report the node's binding plan";
  EXPECT_EQ(started.bindings(0).node(), "gpu07");
  EXPECT_EQ(started.bindings(0).gpus(), "0");
  EXPECT_EQ(started.bindings(1).gpus(), "1");
  EXPECT_EQ(node.LiveRanks(), 2U);
  EXPECT_EQ(link_->Register().running_size(), 1);

  loop_.run_for(std::chrono::seconds(5));
  std::vector<v1::AgentMessage::MessageCase> kinds;
  for (const v1::AgentMessage& m : link_->sent) kinds.push_back(m.message_case());
  EXPECT_EQ(kinds, (std::vector<v1::AgentMessage::MessageCase>{
                       v1::AgentMessage::kRanksStarted, v1::AgentMessage::kRankExited,
                       v1::AgentMessage::kRankExited, v1::AgentMessage::kJobReleased}));
  EXPECT_EQ(node.LiveRanks(), 0U);
  const v1::Register after = link_->Register();
  EXPECT_EQ(after.running_size(), 0);
  ASSERT_EQ(after.finished_size(), 1);
  EXPECT_EQ(after.finished(0).job_id(), 9);
  EXPECT_EQ(after.finished(0).ranks_ok(), 2);
}

// A job step cannot run under fake execution: refused, naming why, and the
// job's node is not released for it.
TEST_F(AgentNodeTest, AFakeStepIsRefusedWithTheReason) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup& own, SendToController send) {
                   return std::make_unique<FakeRunner>(loop_, own, std::move(send));
                 }));
  node.Start();
  v1::ControllerMessage step = LaunchOf(9, 1);
  step.mutable_launch()->set_step(1);
  link_->Deliver(step);
  ASSERT_EQ(link_->sent.size(), 1U);
  ASSERT_TRUE(link_->sent[0].has_launch_failed());
  EXPECT_EQ(link_->sent[0].launch_failed().step(), 1);
  EXPECT_NE(link_->sent[0].launch_failed().reason().find("gpu07: fake execution"),
            std::string::npos)
      << link_->sent[0].launch_failed().reason();
}

// A node its controller has given up on (no answer for NodeTimeout) stops
// its ranks: the link says so, the runner kills them.
TEST_F(AgentNodeTest, ASilentControllerFencesTheRunner) {
  AgentNode node(environment_, setup_, Parts([&](const NodeSetup&, SendToController) {
                   return std::make_unique<RecordingRunner>(calls_);
                 }));
  node.Start();
  ASSERT_NE(link_, nullptr);
  v1::ControllerMessage ack;
  ack.mutable_heartbeat_ack();
  link_->Deliver(ack);  // the session's own; passed on, it changes nothing
  link_->Silence();
  EXPECT_EQ(calls_, (std::vector<std::string>{"runner start", "fence"}));
}

}  // namespace
}  // namespace cohort::agent
