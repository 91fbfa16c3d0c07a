// SPDX-License-Identifier: Apache-2.0
// What operators of a shared cluster set in the engine: the account tree's
// limits that hold jobs back (with `why`'s words), budgets that burn down,
// sacctmgr's changes with their audit; and reservations, maintenance
// windows among them.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cohort/engine/engine.h"
#include "test_support.h"

namespace cohort {
namespace {

using std::chrono::minutes;
using testing::ClusterBuilder;

constexpr Millis kT0{1'000'000};

class OperatorsTest : public ::testing::Test {
 protected:
  void Start(const std::function<void(config::ClusterConfig&)>& adjust) {
    cluster_ =
        std::make_unique<testing::Cluster>(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build());
    config_.nodes = cluster_->nodes;
    config::PartitionSpec all;
    all.name = "all";
    all.is_default = true;
    all.nodes = cluster_->topology.NodeNames();
    all.max_time = std::chrono::hours(4);
    config_.partitions = {all};
    // Time moves by hours here without heartbeats: nodes stay up.
    config_.node_timeout = std::chrono::hours(24 * 7);
    adjust(config_);
    MakeEngine();
  }

  void MakeEngine() {
    alloc::NodePool pool =
        alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
    engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
      NodeReport report;
      report.cpus = 64;
      report.gpus = 8;
      report.memory_mb = 1024 * 1024;
      Effects fx;
      ASSERT_TRUE(engine_->NodeRegistered(n, report, now_, fx).ok());
    }
  }

  // A one-rank job of `gpus` GPUs (whole nodes of 8 past 8).
  static JobRequest Request(const std::string& user, int gpus, minutes time) {
    JobRequest r;
    r.name = "train";
    r.user_name = user;
    r.uid = user == "alice" ? 1000 : 1001;
    r.nodes = gpus > 8 ? (gpus + 7) / 8 : 1;  // 8 GPUs a node
    r.gpus_per_node = gpus > 8 ? 8 : gpus;
    r.tasks_per_node = 1;
    r.time_limit = time;
    return r;
  }
  absl::StatusOr<JobId> TrySubmit(const std::string& user, const std::string& account, int gpus,
                                  minutes time = minutes(60), const std::string& reservation = "") {
    JobRequest r = Request(user, gpus, time);
    r.account = account;
    r.reservation = reservation;
    Effects fx;
    return engine_->Submit(r, now_, fx);
  }
  absl::StatusOr<JobId> TrySubmitQos(const std::string& user, const std::string& qos, int gpus,
                                     minutes time = minutes(60)) {
    JobRequest r = Request(user, gpus, time);
    r.qos = qos;
    Effects fx;
    return engine_->Submit(r, now_, fx);
  }

  JobId Submit(const std::string& user, const std::string& account, int gpus,
               minutes time = minutes(60), const std::string& reservation = "") {
    absl::StatusOr<JobId> id = TrySubmit(user, account, gpus, time, reservation);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  void Schedule() {
    Effects fx;
    engine_->Schedule(now_, fx);
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  }

  void Finish(JobId id) {
    const Job& job = *engine_->FindJob(id);
    const std::vector<alloc::NodeGrant> grants = job.run.placement.grants;
    Effects fx;
    for (const alloc::NodeGrant& g : grants) engine_->RankExited(id, g.node, 0, 0, now_, fx);
    for (const alloc::NodeGrant& g : grants) engine_->JobReleased(id, g.node, now_, fx);
  }

  absl::Status Update(std::string verb, std::string entity, std::vector<std::string> names,
                      std::vector<std::pair<std::string, std::string>> set = {},
                      std::vector<std::string> accounts = {}, std::uint32_t uid = 0) {
    AccountUpdate update{.verb = std::move(verb),
                         .entity = std::move(entity),
                         .names = std::move(names),
                         .accounts = std::move(accounts),
                         .set = std::move(set)};
    Effects fx;
    return engine_->UpdateAccounts(update, Caller{.uid = uid, .operator_listed = false}, now_, fx)
        .status();
  }

  const Job& At(JobId id) const { return *engine_->FindJob(id); }

  void Tick() {
    Effects fx;
    engine_->Tick(now_, fx);
  }

  absl::Status Reserve(const std::string& name, Millis start, Millis end, std::vector<NodeId> nodes,
                       std::uint32_t flags, std::vector<std::string> users = {"root"},
                       int node_count = 0, std::uint32_t uid = 0) {
    AdvanceReservation r;
    r.name = name;
    r.start = start;
    r.end = end;
    r.nodes = std::move(nodes);
    r.users = std::move(users);
    r.flags = flags;
    Effects fx;
    return engine_->CreateReservation(std::move(r), node_count,
                                      Caller{.uid = uid, .operator_listed = false}, now_, fx);
  }

  std::vector<NodeId> AllNodes() const {
    std::vector<NodeId> nodes;
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) nodes.push_back(n);
    return nodes;
  }

  std::unique_ptr<testing::Cluster> cluster_;
  config::ClusterConfig config_;
  std::unique_ptr<Engine> engine_;
  Millis now_ = kT0;
};

config::AccountSpec Account(std::string name, std::string parent,
                            std::vector<std::string> users = {}) {
  config::AccountSpec spec;
  spec.name = std::move(name);
  spec.parent = std::move(parent);
  spec.users = std::move(users);
  return spec;
}

TEST_F(OperatorsTest, AGpuQuotaInTheMiddleOfTheTreeHoldsALeafUsersJob) {
  Start([](config::ClusterConfig& c) {
    c.accounts = {Account("research", ""), Account("vision", "research"),
                  Account("cv", "vision", {"alice"})};
    c.accounts[1].limits.grp_tres.gpus = 16;
  });
  const JobId first = Submit("alice", "cv", 8);
  const JobId second = Submit("alice", "cv", 8);
  const JobId third = Submit("alice", "cv", 8);
  Schedule();
  EXPECT_EQ(At(first).state, JobState::kRunning);
  EXPECT_EQ(At(second).state, JobState::kRunning);
  ASSERT_EQ(At(third).state, JobState::kPending);
  EXPECT_EQ(At(third).reason, "AssocGrpGRES");
  EXPECT_EQ(At(third).reason_detail,
            "account vision, above the job's account cv, allows 16 GPUs at once "
            "(GrpTRES=gres/gpu=16); its jobs and those of the accounts under it hold 16 and "
            "this job needs 8");
  Finish(first);
  Schedule();
  EXPECT_EQ(At(third).state, JobState::kRunning) << "the quota has room again";
}

TEST_F(OperatorsTest, ASpentGpuHourBudgetStopsTheNextJobAndSaysWhatWouldFit) {
  Start([](config::ClusterConfig& c) {
    c.usage_reset_period = config::UsageResetPeriod::kMonthly;
    c.accounts = {Account("lab", "", {"alice"})};
    c.accounts[0].limits.grp_tres_mins.gpus = 60;  // one GPU-hour
  });
  const JobId first = Submit("alice", "lab", 1, minutes(50));
  Schedule();
  ASSERT_EQ(At(first).state, JobState::kRunning);
  now_ += minutes(45);
  Finish(first);
  const JobId next = Submit("alice", "lab", 1, minutes(30));
  Schedule();
  ASSERT_EQ(At(next).state, JobState::kPending);
  EXPECT_EQ(At(next).reason, "AssocGrpGRESMinutes");
  const std::string& detail = At(next).reason_detail;
  EXPECT_NE(detail.find("account lab has used 0.8 of its 1.0 GPU-hours (75%, "
                        "GrpTRESMins=gres/gpu=60)"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("this job may use up to 0.5 (1 GPU for 00:30:00); with --time=00:15:00 "
                        "or less it fits"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("PriorityUsageResetPeriod=MONTHLY"), std::string::npos) << detail;

  const absl::StatusOr<JobId> whole = TrySubmit("alice", "lab", 2, minutes(40));
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("whole budget is 1.0"), std::string::npos)
      << whole.status();
}

TEST_F(OperatorsTest, PerJobAndPerUserLimitsAreInheritedDownTheTree) {
  Start([](config::ClusterConfig& c) {
    c.accounts = {Account("research", ""), Account("cv", "research", {"alice"})};
    c.accounts[0].limits.max_tres_per_job.gpus = 8;
    c.accounts[0].limits.max_jobs = 1;
    c.accounts[0].limits.max_submit_jobs = 2;
  });
  const absl::StatusOr<JobId> big = TrySubmit("alice", "cv", 16);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "the job can never run here: account cv allows 8 GPUs per job "
            "(MaxTRESPerJob=gres/gpu=8) and the job asks for 16; ask for fewer, or charge "
            "another account (-A)");
  const JobId one = Submit("alice", "cv", 1);
  const JobId two = Submit("alice", "cv", 1);
  Schedule();
  EXPECT_EQ(At(one).state, JobState::kRunning);
  EXPECT_EQ(At(two).reason, "AssocMaxJobsLimit");
  const absl::StatusOr<JobId> third = TrySubmit("alice", "cv", 1);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(OperatorsTest, SacctmgrAddsAnAccountAndAUserWhoCanThenSubmit) {
  Start([](config::ClusterConfig& c) { c.accounts = {Account("research", "")}; });
  EXPECT_EQ(Update("add", "account", {"vision"}, {{"Parent", "research"}}, {}, 1000).code(),
            absl::StatusCode::kPermissionDenied)
      << "only root and operators";
  ASSERT_TRUE(
      Update("add", "account", {"vision"}, {{"Parent", "research"}, {"GrpTRES", "gres/gpu=8"}})
          .ok());
  const absl::StatusOr<JobId> before = TrySubmit("bob", "vision", 1);
  ASSERT_FALSE(before.ok()) << "an account sacctmgr made takes its users only";
  EXPECT_NE(before.status().message().find("sacctmgr add user NAME Account=vision"),
            std::string::npos)
      << before.status();
  ASSERT_TRUE(Update("add", "user", {"bob"}, {{"MaxJobs", "3"}}, {"vision"}).ok());
  EXPECT_TRUE(TrySubmit("bob", "vision", 1).ok());
  EXPECT_TRUE(TrySubmit("bob", "", 1).ok()) << "vision is bob's default account";

  EXPECT_EQ(Update("modify", "account", {"research"}, {{"Fairshare", "5"}}).code(),
            absl::StatusCode::kFailedPrecondition)
      << "cohort.conf's accounts are changed there";
  EXPECT_EQ(Update("modify", "account", {"research"}, {{"Parent", "vision"}}).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Update("add", "account", {"cv"}, {{"Parent", "vision"}}).ok());
  const absl::Status loop = Update("modify", "account", {"vision"}, {{"Parent", "cv"}});
  EXPECT_EQ(loop.message(),
            "account vision would be under itself (vision under cv under vision); give one of "
            "them another parent");
  EXPECT_EQ(Update("delete", "account", {"vision"}).code(), absl::StatusCode::kFailedPrecondition)
      << "cv is under it";
  EXPECT_EQ(Update("add", "account", {"bad name"}).code(), absl::StatusCode::kInvalidArgument);

  const std::vector<AccountAudit>& audit = engine_->AccountsAudit();
  ASSERT_EQ(audit.size(), 3U);
  EXPECT_EQ(audit[0].action, "Add Account");
  EXPECT_EQ(audit[0].where, "vision");
  EXPECT_EQ(audit[0].info, "Parent=research GrpTRES=gres/gpu=8");
  EXPECT_EQ(audit[1].action, "Add User");
  EXPECT_EQ(audit[1].where, "bob in vision");
  EXPECT_EQ(audit[1].time, now_);

  // What a store keeps comes back on a restart.
  SavedState saved;
  saved.accounting = engine_->Accounting();
  MakeEngine();
  Effects fx;
  engine_->Restore(std::move(saved), now_, fx);
  EXPECT_EQ(engine_->AccountsAudit().size(), 3U);
  const config::AccountSpec* vision = engine_->Config().FindAccount("vision");
  ASSERT_NE(vision, nullptr);
  EXPECT_EQ(vision->parent, "research");
  EXPECT_EQ(vision->limits.grp_tres.gpus, 8);
  ASSERT_EQ(vision->user_limits.size(), 1U);
  EXPECT_EQ(vision->user_limits[0].limits.max_jobs, 3);
  EXPECT_TRUE(TrySubmit("bob", "", 1).ok());
}

TEST_F(OperatorsTest, SacctmgrQosLimitsItsJobsTogetherAndAssociationsListTheirQos) {
  Start([](config::ClusterConfig&) {});
  ASSERT_TRUE(Update("add", "account", {"vision"}).ok());
  ASSERT_TRUE(Update("add", "user", {"alice", "bob"}, {}, {"vision"}).ok());
  ASSERT_TRUE(Update("add", "qos", {"burst"},
                     {{"Priority", "50"},
                      {"GrpTRES", "gres/gpu=16"},
                      {"MaxTRESPerUser", "gres/gpu=16"},
                      {"MaxWall", "2:00:00"}})
                  .ok());
  const config::QosSpec* burst = engine_->Config().FindQos("burst");
  ASSERT_NE(burst, nullptr);
  EXPECT_EQ(burst->max_gpus_per_user, 16);
  EXPECT_EQ(burst->max_wall, std::chrono::hours(2));
  EXPECT_TRUE(burst->managed);

  // GrpTRES bounds the QOS's jobs together, whoever runs them.
  const JobId a = TrySubmitQos("alice", "burst", 8).value();
  const JobId b = TrySubmitQos("bob", "burst", 8).value();
  const JobId c = TrySubmitQos("alice", "burst", 8).value();
  Schedule();
  EXPECT_EQ(At(a).state, JobState::kRunning);
  EXPECT_EQ(At(b).state, JobState::kRunning);
  ASSERT_EQ(At(c).state, JobState::kPending);
  EXPECT_EQ(At(c).reason, "QOSGrpGRES");
  EXPECT_EQ(At(c).reason_detail,
            "QOS burst allows 16 GPUs at once (GrpTRES=gres/gpu=16); its jobs hold 16 and this "
            "job needs 8");
  EXPECT_EQ(TrySubmitQos("alice", "burst", 8, minutes(180)).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "over MaxWall";

  // An association's QOS list: what its jobs may ask for, and their default.
  ASSERT_TRUE(Update("modify", "account", {"vision"}, {{"QOS", "normal"}}).ok());
  const absl::StatusOr<JobId> refused = TrySubmitQos("alice", "burst", 1);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("user alice in account vision may use QOS normal; "
                                            "\"burst\" is not one of them"),
            std::string::npos)
      << refused.status();
  ASSERT_TRUE(
      Update("modify", "user", {"alice"}, {{"QOS+", "burst"}, {"DefaultQOS", "burst"}}, {"vision"})
          .ok());
  EXPECT_EQ(At(TrySubmitQos("alice", "", 0).value()).qos, "burst") << "her DefaultQOS";
  EXPECT_EQ(At(TrySubmitQos("bob", "", 0).value()).qos, "normal") << "the account's list";
  EXPECT_EQ(TrySubmitQos("bob", "burst", 0).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Update("modify", "account", {"vision"}, {{"DefaultQOS", "nosuch"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Update("modify", "account", {"vision"}, {{"DefaultQOS", "burst"}}).message(),
            "account vision: DefaultQOS=burst is not one of the QOS it may use (normal); add it "
            "to QOS= or pick one of those");

  // Refusals: cohort.conf's QOS, one in use, a loop of one, unknown keys.
  EXPECT_EQ(Update("modify", "qos", {"normal"}, {{"Priority", "5"}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Update("delete", "qos", {"burst"}).code(), absl::StatusCode::kFailedPrecondition)
      << "alice's association and jobs name it";
  EXPECT_EQ(Update("modify", "qos", {"burst"}, {{"Preempt", "burst"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Update("modify", "qos", {"burst"}, {{"Flags", "DenyOnLimit"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Update("modify", "qos", {"burst"}, {{"MaxTRESPerUser", "cpu=4"}}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Update("modify", "qos", {"burst"}, {{"GrpTRES", "gres/gpu=-1"}}).ok());
  Schedule();
  EXPECT_EQ(At(c).state, JobState::kRunning) << "the limit is gone";

  // What a store keeps comes back on a restart.
  SavedState saved;
  saved.accounting = engine_->Accounting();
  ASSERT_EQ(saved.accounting.qos.size(), 1U);
  MakeEngine();
  Effects fx;
  engine_->Restore(std::move(saved), now_, fx);
  burst = engine_->Config().FindQos("burst");
  ASSERT_NE(burst, nullptr);
  EXPECT_EQ(burst->priority, 50);
  EXPECT_EQ(burst->max_gpus_per_user, 16);
  EXPECT_EQ(TrySubmitQos("bob", "burst", 0).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(At(TrySubmitQos("alice", "", 0).value()).qos, "burst");
}

TEST_F(OperatorsTest, AQosGpuHourBudgetBurnsDownWithItsJobs) {
  Start([](config::ClusterConfig& c) {
    c.usage_reset_period = config::UsageResetPeriod::kMonthly;
    config::QosSpec spot;
    spot.name = "spot";
    spot.limits.grp_tres_mins.gpus = 60;  // one GPU-hour among all its jobs
    c.qos = {spot};
  });
  const JobId first = TrySubmitQos("alice", "spot", 1, minutes(50)).value();
  Schedule();
  ASSERT_EQ(At(first).state, JobState::kRunning);
  now_ += minutes(45);
  Finish(first);
  const JobId next = TrySubmitQos("bob", "spot", 1, minutes(30)).value();
  Schedule();
  ASSERT_EQ(At(next).state, JobState::kPending);
  EXPECT_EQ(At(next).reason, "QOSGrpGRESMinutes");
  EXPECT_NE(At(next).reason_detail.find("QOS spot has used 0.8 of its 1.0 GPU-hours (75%"),
            std::string::npos)
      << At(next).reason_detail;
  EXPECT_EQ(At(TrySubmitQos("bob", "", 1, minutes(30)).value()).qos, "normal");
  // The use is kept with fair-share usage and comes back on a restart.
  SavedState saved;
  saved.usage = engine_->Usage().Snapshot(now_);
  MakeEngine();
  Effects fx;
  engine_->Restore(std::move(saved), now_, fx);
  EXPECT_NEAR(engine_->Usage().QosPeriodUse("spot", now_).gpu_seconds, 45 * 60, 1);
  const absl::StatusOr<JobId> whole = TrySubmitQos("bob", "spot", 2, minutes(40));
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kFailedPrecondition)
      << "costs more than the whole budget";
}

TEST_F(OperatorsTest, AReservationByCountIsPlacedAgainAtItsStartWhereANodeCannotServe) {
  Start([](config::ClusterConfig&) {});
  const Millis start = now_ + minutes(30);
  // Four nodes under one leaf switch (each leaf has 4).
  ASSERT_TRUE(Reserve("four", start, start + minutes(60), {}, 0, {"alice"}, 4).ok());
  std::vector<NodeId> planned = engine_->Reservations().back().nodes;
  ASSERT_EQ(planned.size(), 4U);
  EXPECT_TRUE(engine_->Reservations().back().by_count);
  const auto leaf_of = [&](NodeId n) { return cluster_->topology.LeafOf(n); };
  for (const NodeId n : planned) EXPECT_EQ(leaf_of(n), leaf_of(planned[0]));
  // One of them goes down before the start.
  Effects fx;
  ASSERT_TRUE(
      engine_->Down(planned[1], "PSU", Caller{.uid = 0, .operator_listed = false}, now_, fx).ok());
  now_ = start;
  Tick();
  const std::vector<NodeId> placed = engine_->Reservations().back().nodes;
  ASSERT_EQ(placed.size(), 4U);
  EXPECT_EQ(std::count(placed.begin(), placed.end(), planned[1]), 0) << "the down node is left out";
  for (const NodeId n : placed) EXPECT_EQ(leaf_of(n), leaf_of(placed[0])) << "the same shape";
  const JobId in = Submit("alice", "", 0, minutes(30), "four");
  Schedule();
  EXPECT_EQ(At(in).state, JobState::kRunning) << At(in).reason << ": " << At(in).reason_detail;

  // A shape: at most one leaf switch, so 5 nodes cannot be had.
  const Millis later = start + std::chrono::hours(3);
  AdvanceReservation shaped;
  shaped.name = "shaped";
  shaped.start = later;
  shaped.end = later + minutes(60);
  shaped.users = {"alice"};
  shaped.switches = 1;
  const absl::Status five =
      engine_->CreateReservation(shaped, 5, Caller{.uid = 0, .operator_listed = false}, now_, fx);
  EXPECT_EQ(five.code(), absl::StatusCode::kFailedPrecondition) << five;
  EXPECT_NE(five.message().find("under at most 1 leaf switches"), std::string::npos) << five;
  EXPECT_TRUE(
      engine_->CreateReservation(shaped, 3, Caller{.uid = 0, .operator_listed = false}, now_, fx)
          .ok());
  shaped.nodes = {0};
  shaped.name = "named";
  EXPECT_EQ(
      engine_->CreateReservation(shaped, 0, Caller{.uid = 0, .operator_listed = false}, now_, fx)
          .code(),
      absl::StatusCode::kInvalidArgument)
      << "Switches= shapes a reservation by count only";
}

TEST_F(OperatorsTest, AMaintenanceWindowKeepsALongJobOffWhileAShortOneStarts) {
  Start([](config::ClusterConfig&) {});
  const Millis hour = std::chrono::hours(1);
  ASSERT_TRUE(Reserve("maint", now_ + 2 * hour, now_ + 4 * hour, AllNodes(), kResvMaint).ok());
  const JobId long_job = Submit("alice", "", 0, minutes(180));
  const JobId short_job = Submit("alice", "", 0, minutes(60));
  Schedule();
  EXPECT_EQ(At(short_job).state, JobState::kRunning) << "it ends before the window";
  ASSERT_EQ(At(long_job).state, JobState::kPending);
  EXPECT_EQ(At(long_job).reason, "ReqNodeNotAvail, Reserved for maintenance");
  EXPECT_NE(At(long_job).reason_detail.find("reservation maint (MAINT) holds n[001-008]"),
            std::string::npos)
      << At(long_job).reason_detail;
  EXPECT_NE(At(long_job).reason_detail.find("with --time=02:00:00 or less it starts now"),
            std::string::npos)
      << At(long_job).reason_detail;
  // The window ends: the long job starts.
  now_ += 4 * hour;
  Finish(short_job);
  Tick();
  Schedule();
  EXPECT_EQ(At(long_job).state, JobState::kRunning)
      << At(long_job).reason << ": " << At(long_job).reason_detail;
  EXPECT_TRUE(engine_->Reservations().empty()) << "an ended reservation goes";
}

TEST_F(OperatorsTest, AUsersReservationTakesItsJobsOnItsNodesOnceActive) {
  Start([](config::ClusterConfig&) {});
  const Millis start = now_ + minutes(10);
  ASSERT_TRUE(Reserve("team", start, start + std::chrono::hours(2), {0, 1}, 0, {"alice"}).ok());
  const JobId in = Submit("alice", "", 0, minutes(30), "team");
  const absl::StatusOr<JobId> refused = TrySubmit("bob", "", 0, minutes(30), "team");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(TrySubmit("alice", "", 0, minutes(30), "nosuch").status().code(),
            absl::StatusCode::kNotFound);
  Schedule();
  ASSERT_EQ(At(in).state, JobState::kPending);
  EXPECT_EQ(At(in).reason, "Reservation");
  // Others keep off its nodes while their limits would meet its window.
  std::vector<JobId> others;
  for (int i = 0; i < 8; ++i) others.push_back(Submit("bob", "", 0, minutes(60)));
  Schedule();
  for (const JobId id : others) {
    if (At(id).state != JobState::kRunning) continue;
    for (const alloc::NodeGrant& g : At(id).run.placement.grants) {
      EXPECT_GT(g.node, 1) << "job " << id << " runs on a reserved node";
    }
  }
  now_ = start;
  Tick();
  Schedule();
  ASSERT_EQ(At(in).state, JobState::kRunning) << At(in).reason << ": " << At(in).reason_detail;
  EXPECT_LE(At(in).run.placement.grants.front().node, 1) << "it runs on the reservation's nodes";
}

TEST_F(OperatorsTest, AReservationIsRefusedWhereRunningJobsMayOutlastItsStart) {
  Start([](config::ClusterConfig&) {});
  const JobId running = Submit("alice", "", 8, minutes(120));
  Schedule();
  ASSERT_EQ(At(running).state, JobState::kRunning);
  const NodeId busy = At(running).run.placement.grants.front().node;
  const Millis start = now_ + minutes(30);
  const absl::Status displaced = Reserve("soon", start, start + minutes(60), {busy}, kResvMaint);
  EXPECT_EQ(displaced.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(displaced.message().find(fmt::format("{} (until", running)), std::string::npos)
      << displaced;
  EXPECT_TRUE(
      Reserve("soon", start, start + minutes(60), {busy}, kResvMaint | kResvIgnoreJobs).ok());
  EXPECT_EQ(Reserve("other", start, start + minutes(60), {busy}, 0).code(),
            absl::StatusCode::kFailedPrecondition)
      << "overlaps soon";
  // By count: the allocator picks nodes free of jobs and other reservations.
  ASSERT_TRUE(Reserve("four", start, start + minutes(60), {}, 0, {"alice"}, 4).ok());
  const AdvanceReservation& four = engine_->Reservations().back();
  ASSERT_EQ(four.nodes.size(), 4U);
  for (const NodeId n : four.nodes) EXPECT_NE(n, busy);
  EXPECT_EQ(Reserve("mine", start, start + minutes(60), {7}, 0, {"bob"}, 0, 1000).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Reserve("bad name", start, start + minutes(60), {7}, 0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(OperatorsTest, ADailyReservationComesAgainAndRestartsKeepReservations) {
  Start([](config::ClusterConfig&) {});
  const Millis start = now_ + minutes(10);
  ASSERT_TRUE(Reserve("nightly", start, start + minutes(60), {3}, kResvDaily | kResvMaint).ok());
  now_ = start + minutes(61);
  Tick();
  ASSERT_EQ(engine_->Reservations().size(), 1U);
  EXPECT_EQ(engine_->Reservations()[0].start, start + std::chrono::hours(24));

  SavedState saved;
  saved.reservations = engine_->Reservations();
  MakeEngine();
  Effects fx;
  engine_->Restore(std::move(saved), now_, fx);
  ASSERT_EQ(engine_->Reservations().size(), 1U);
  EXPECT_EQ(engine_->Reservations()[0].name, "nightly");
  EXPECT_EQ(engine_->Reservations()[0].flags, kResvDaily | kResvMaint);
}

}  // namespace
}  // namespace cohort
