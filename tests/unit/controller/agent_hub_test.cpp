// SPDX-License-Identifier: Apache-2.0
// The agent hub over a real engine and state database, with fake agent
// links: who may register, a node's newer stream replaces its older one,
// launches go out once the job's RUNNING state is durable, and an
// environment kept only in the store is read off the state thread without
// launching a job cancelled meanwhile.
#include "agents/agent_hub.h"

#include <future>

#include <gtest/gtest.h>

#include "controller/controller_test_support.h"
#include "controller/fake_agent_link.h"
#include "store/records.h"
#include "test_support.h"

namespace cohort::controller {
namespace {

using testing::RunUntil;

// What the controller does with effects, less the pass and the logs.
class SendingSink final : public EffectSink {
 public:
  explicit SendingSink(Outbox& outbox) : outbox_(outbox) {}
  void Execute(Effects& effects) override {
    outbox_.MarkChanged(effects.changed_jobs, effects.changed_nodes);
    for (const Command& command : effects.commands) hub->Send(command);
    effects = {};
    outbox_.ScheduleFlush();
  }
  AgentHub* hub = nullptr;

 private:
  Outbox& outbox_;
};

// Who the agent is was verified before the hub sees it (AgentGateway and
// the Authenticator): the hub checks the node, the protocol and the links.
v1::AgentMessage RegisterMessage(const std::string& node, int protocol = 1) {
  v1::AgentMessage message;
  v1::Register* r = message.mutable_register_();
  r->set_node_name(node);
  r->set_protocol_version(protocol);
  r->mutable_resources()->set_cpus(64);
  r->mutable_resources()->set_memory_mb(1024 * 1024);
  r->mutable_resources()->set_gpus(8);
  return message;
}

std::string EnvValue(const v1::Launch& launch, const std::string& name) {
  for (const v1::EnvVar& var : launch.spec().env()) {
    if (var.name() == name) return var.value();
  }
  return {};
}

class AgentHubTest : public ::testing::Test {
 protected:
  AgentHubTest() {
    state_ = testing::OneLeafState(2);
    records_ = std::make_unique<StateRecords>(*state_);
    outbox_ = std::make_unique<Outbox>(io_, *records_, dir_.Open(Store::Mode::kWrite), nullptr, 2);
    reader_ = std::make_unique<StoreReader>(io_, dir_.Open(Store::Mode::kRead));
    sink_ = std::make_unique<SendingSink>(*outbox_);
    hub_ =
        std::make_unique<AgentHub>(*state_, *outbox_, *reader_, *sink_,
                                   AgentHub::Options{.heartbeat_interval = std::chrono::seconds(1),
                                                     .on_image_prepared = {},
                                                     .on_nvlink_report = {}});
    sink_->hub = hub_.get();
  }

  JobId Submit(int nodes, const std::string& foo) {
    JobRequest r;
    r.name = "train";
    r.user_name = "alice";
    r.uid = 1000;
    r.nodes = nodes;
    r.tasks_per_node = 1;
    Effects effects;
    absl::StatusOr<JobId> id = state_->engine.Submit(r, ControllerState::Now(), effects);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return 0;
    state_->specs[*id].add_argv("train.py");
    v1::EnvVar* var = state_->envs[*id].add_env();
    var->set_name("FOO");
    var->set_value(foo);
    outbox_->MarkNew(*id);
    sink_->Execute(effects);
    return *id;
  }
  void Schedule() {
    Effects effects;
    state_->engine.Schedule(ControllerState::Now(), effects);
    sink_->Execute(effects);
  }
  // Runs the state thread until everything deferred so far has run.
  void Drain() {
    bool done = false;
    outbox_->Defer([&] { done = true; });
    ASSERT_TRUE(RunUntil(io_, [&] { return done; }));
  }
  // Until every read asked so far has answered on the state thread.
  void DrainReads() {
    bool done = false;
    reader_->Read([](Store& /*store*/) { return 0; }, [&](int /*unused*/) { done = true; });
    ASSERT_TRUE(RunUntil(io_, [&] { return done; }));
  }
  // A job submitted before a restart: its environment is in the store only.
  JobId SubmitBeforeRestart(int nodes, const std::string& foo) {
    const JobId id = Submit(nodes, foo);
    Drain();
    state_->envs.erase(id);
    return id;
  }

  testing::StateDir dir_;
  boost::asio::io_context io_;
  std::unique_ptr<ControllerState> state_;
  std::unique_ptr<StateRecords> records_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<StoreReader> reader_;
  std::unique_ptr<SendingSink> sink_;
  std::unique_ptr<AgentHub> hub_;
};

TEST_F(AgentHubTest, RefusesAgentsItCannotTrust) {
  FakeAgentLink unknown;
  hub_->OnMessage(&unknown, RegisterMessage("gpu999"));
  ASSERT_TRUE(unknown.closed.has_value());
  EXPECT_EQ(unknown.closed->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(unknown.closed->message().find("gpu999"), std::string_view::npos);

  FakeAgentLink newer;
  hub_->OnMessage(&newer, RegisterMessage("n001", 2));
  ASSERT_TRUE(newer.closed.has_value());
  EXPECT_EQ(newer.closed->code(), absl::StatusCode::kFailedPrecondition);

  FakeAgentLink silent;
  v1::AgentMessage heartbeat;
  heartbeat.mutable_job_released()->set_job_id(1);
  hub_->OnMessage(&silent, heartbeat);
  ASSERT_TRUE(silent.closed.has_value());
  EXPECT_EQ(silent.closed->code(), absl::StatusCode::kFailedPrecondition);

  for (const FakeAgentLink* link : {&unknown, &newer, &silent}) {
    EXPECT_FALSE(link->Registered());
  }
  EXPECT_EQ(state_->engine.ViewNode(0).status, NodeStatus::kUnknown);
}

TEST_F(AgentHubTest, SecondAgentClaimingALiveNodeIsRefused) {
  FakeAgentLink first;
  FakeAgentLink second;
  hub_->OnMessage(&first, RegisterMessage("n001"));
  ASSERT_TRUE(first.Registered());
  const JobId running = Submit(1, "x");
  Schedule();
  ASSERT_TRUE(RunUntil(io_, [&] { return first.Launches().size() == 1; }));
  // A second agent's claim, reporting none of the node's jobs: refused,
  // saying where the node is connected from; the job keeps running.
  hub_->OnMessage(&second, RegisterMessage("n001"));
  ASSERT_TRUE(second.closed.has_value());
  EXPECT_EQ(second.closed->code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(second.closed->message().find("already connected from 10.0.0.7"),
            std::string_view::npos)
      << second.closed->message();
  EXPECT_FALSE(first.closed.has_value());
  EXPECT_EQ(state_->engine.FindJob(running)->state, JobState::kRunning);
}

TEST_F(AgentHubTest, NodesNewLinkTakesOverOnceTheOldOneIsGone) {
  FakeAgentLink first;
  FakeAgentLink second;
  hub_->OnMessage(&first, RegisterMessage("n001"));
  ASSERT_TRUE(first.Registered());
  // The agent restarted: its old stream ended, and the new one registers.
  hub_->OnGone(&first);
  hub_->OnMessage(&second, RegisterMessage("n001"));
  EXPECT_TRUE(second.Registered());
  EXPECT_FALSE(second.closed.has_value());
  const JobId id = Submit(1, "x");
  Schedule();
  ASSERT_TRUE(RunUntil(io_, [&] { return second.Launches().size() == 1; }));
  EXPECT_EQ(second.Launches()[0].job_id(), id);
  EXPECT_EQ(second.Launches()[0].master_addr(), "10.0.0.7");
  EXPECT_EQ(state_->engine.FindJob(id)->state, JobState::kRunning);
}

TEST_F(AgentHubTest, LaunchGoesOutOnceRunningIsDurable) {
  FakeAgentLink link;
  hub_->OnMessage(&link, RegisterMessage("n001"));
  std::optional<v1::JobState> durable_at_launch;
  JobId id = 0;
  link.on_send = [&](const v1::ControllerMessage& message) {
    if (!message.has_launch()) return;
    const std::optional<v1::JobRecord> record = dir_.DurableJob(id);
    durable_at_launch = record ? record->state() : v1::JOB_STATE_UNSPECIFIED;
  };
  id = Submit(1, "in-memory");
  Schedule();
  EXPECT_TRUE(link.Launches().empty()) << "a launch went out before RUNNING was durable";
  ASSERT_TRUE(RunUntil(io_, [&] { return link.Launches().size() == 1; }));
  EXPECT_EQ(durable_at_launch, v1::JOB_RUNNING);
  EXPECT_EQ(EnvValue(link.Launches()[0], "FOO"), "in-memory");
}

TEST_F(AgentHubTest, GangLaunchesWaitForTheStoredEnvironmentInOrder) {
  const JobId id = SubmitBeforeRestart(2, "from-the-store");
  FakeAgentLink a;
  FakeAgentLink b;
  hub_->OnMessage(&a, RegisterMessage("n001"));
  hub_->OnMessage(&b, RegisterMessage("n002"));
  Schedule();
  ASSERT_TRUE(RunUntil(io_, [&] { return a.Launches().size() == 1 && b.Launches().size() == 1; }));
  for (const FakeAgentLink* link : {&a, &b}) {
    const v1::Launch launch = link->Launches()[0];
    EXPECT_EQ(launch.job_id(), id);
    EXPECT_EQ(launch.num_nodes(), 2);
    EXPECT_EQ(EnvValue(launch, "FOO"), "from-the-store");
  }
  EXPECT_NE(a.Launches()[0].node_rank(), b.Launches()[0].node_rank());
  // Kept: a later launch of the job does not read it again.
  ASSERT_TRUE(state_->envs.contains(id));
  EXPECT_EQ(state_->envs.at(id).env(0).value(), "from-the-store");
}

TEST_F(AgentHubTest, JobCancelledWhileItsEnvironmentIsReadIsNotLaunched) {
  const JobId id = SubmitBeforeRestart(1, "never");
  FakeAgentLink link;
  hub_->OnMessage(&link, RegisterMessage("n001"));
  // Hold the reader's thread so that the cancel surely comes first.
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  reader_->Read(
      [gate](Store& /*store*/) {
        gate.wait();
        return 0;
      },
      [](int /*unused*/) {});
  Schedule();
  ASSERT_EQ(state_->engine.FindJob(id)->state, JobState::kRunning);
  Effects effects;
  ASSERT_TRUE(
      state_->engine.Cancel(JobRef{id, -1}, 0, Caller{1000}, ControllerState::Now(), effects).ok());
  sink_->Execute(effects);
  open.set_value();
  DrainReads();
  Drain();
  EXPECT_TRUE(link.Launches().empty()) << "a job cancelled before its launch went out was launched";
  EXPECT_TRUE(std::any_of(link.sent.begin(), link.sent.end(), [&](const v1::ControllerMessage& m) {
    return m.has_terminate() && m.terminate().job_id() == id;
  })) << "the node was not told to stop the job";
}

// A registered agent is believed only for the jobs the engine placed on
// its node: a prolog failure, started ranks, exits and usage reported by
// another node about a job it does not run change nothing.
TEST_F(AgentHubTest, ReportsAboutAJobElsewhereAreDropped) {
  FakeAgentLink a;
  FakeAgentLink b;
  hub_->OnMessage(&a, RegisterMessage("n001"));
  hub_->OnMessage(&b, RegisterMessage("n002"));
  const JobId id = Submit(1, "x");
  Schedule();
  ASSERT_TRUE(RunUntil(io_, [&] { return a.Launches().size() + b.Launches().size() == 1; }));
  FakeAgentLink& liar = a.Launches().empty() ? a : b;
  const Job& job = *state_->engine.FindJob(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  const int attempt = job.run.attempt;

  v1::AgentMessage prolog;
  prolog.mutable_script_failed()->set_job_id(id);
  prolog.mutable_script_failed()->set_attempt(job.run.attempt);
  prolog.mutable_script_failed()->set_script("prolog");
  prolog.mutable_script_failed()->set_reason("forged");
  v1::AgentMessage started;
  started.mutable_ranks_started()->set_job_id(id);
  started.mutable_ranks_started()->add_bindings()->set_rank(7);
  v1::AgentMessage exited;
  exited.mutable_rank_exited()->set_job_id(id);
  exited.mutable_rank_exited()->set_exit_code(1);
  exited.mutable_rank_exited()->set_cpu_ms(std::int64_t{1} << 40);
  v1::AgentMessage released;
  released.mutable_job_released()->set_job_id(id);
  for (const v1::AgentMessage& lie : {prolog, started, exited, released}) {
    hub_->OnMessage(&liar, lie);
  }
  Drain();
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.run.attempt, attempt) << "a prolog failure elsewhere requeued the job";
  EXPECT_EQ(job.run.own_usage.cpu_ms, 0);
  EXPECT_FALSE(state_->bindings.contains(id));
  EXPECT_EQ(hub_->RefusedReports(), 4U);
  EXPECT_FALSE(state_->engine.Admin(&liar == &a ? 0 : 1).drain)
      << "a lie about another node's job drained the liar's own node";
}

// A node whose agent was silent past NodeTimeout (paused, say) is declared
// down while its stream stays open; when the agent speaks again, the
// stream is closed so that it registers again, and the node comes back.
TEST_F(AgentHubTest, NodeDeclaredDownComesBackWhenItsAgentSpeaksAgain) {
  FakeAgentLink paused;
  hub_->OnMessage(&paused, RegisterMessage("n001"));
  ASSERT_TRUE(paused.Registered());
  Effects effects;
  state_->engine.Tick(ControllerState::Now() + std::chrono::minutes(5), effects);
  sink_->Execute(effects);
  ASSERT_EQ(state_->engine.ViewNode(0).status, NodeStatus::kDown);

  v1::AgentMessage heartbeat;
  heartbeat.mutable_heartbeat();
  hub_->OnMessage(&paused, heartbeat);
  ASSERT_TRUE(paused.closed.has_value()) << "the stale stream was kept";
  EXPECT_EQ(paused.closed->code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(paused.closed->message().find("register again"), std::string_view::npos);

  FakeAgentLink again;
  hub_->OnMessage(&again, RegisterMessage("n001"));
  EXPECT_TRUE(again.Registered());
  EXPECT_FALSE(again.closed.has_value());
  EXPECT_EQ(state_->engine.ViewNode(0).status, NodeStatus::kIdle);
}

}  // namespace
}  // namespace cohort::controller
