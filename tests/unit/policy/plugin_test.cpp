// SPDX-License-Identifier: Apache-2.0
// The registry of plugins/builtin.cpp and each built-in policy beside the
// default of its seam, through the allocator that consults them.
#include "cohort/plugin.h"

#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

namespace cohort::plugin {
namespace {

using alloc::GangAllocator;
using alloc::GangRequest;
using alloc::NodeGrant;
using alloc::Outcome;
using alloc::PlacementResult;
using testing::Cluster;
using testing::ClusterBuilder;

// Takes `cpus` CPUs (and no GPU) of each node, as a small job would.
void Take(Cluster& cluster, const std::string& hostlist, int cpus) {
  for (const alloc::NodeId n : cluster.Nodes(hostlist)) {
    const NodeGrant grant{n, cpus, 0, 0};
    cluster.pool.Commit({&grant, 1});
  }
}

GangAllocator AllocatorFor(const Cluster& cluster, const config::PluginChoice& choice) {
  absl::StatusOr<PluginSet> plugins = MakePlugins(choice);
  EXPECT_TRUE(plugins.ok()) << plugins.status();
  return GangAllocator(cluster.topology, plugins->allocator);
}

// The nodes `request` gets under the policies of `choice`, or why none.
std::string Placed(const Cluster& cluster, const config::PluginChoice& choice,
                   const GangRequest& request) {
  GangAllocator allocator = AllocatorFor(cluster, choice);
  const PlacementResult result = allocator.Place(request, cluster.pool);
  return result.outcome == Outcome::kPlaced ? cluster.Names(result.placement)
                                            : "not placed: " + result.reason;
}

GangRequest Cpus(int nodes, int cpus) {
  GangRequest request;
  request.nodes = nodes;
  request.cpus_per_task = cpus;
  return request;
}

TEST(PluginRegistryTest, DefaultsAreTodaysPolicies) {
  const absl::StatusOr<PluginSet> plugins = MakePlugins(config::PluginChoice{});
  ASSERT_TRUE(plugins.ok()) << plugins.status();
  ASSERT_EQ(plugins->allocator.node_filters.size(), 1U);
  EXPECT_EQ(plugins->allocator.node_filters[0]->Name(), "filter/resources");
  EXPECT_EQ(plugins->allocator.node_score->Name(), "score/locality");
  EXPECT_EQ(plugins->allocator.domain_score->Name(), "domain/tightest");
  const auto defaults = DefaultAllocatorPlugins();
  EXPECT_EQ(defaults->node_score->Name(), "score/locality");
  EXPECT_EQ(defaults, DefaultAllocatorPlugins()) << "made once and shared";
}

// The names the registry knows for one key: what it lists when asked for
// one it does not know.
std::set<std::string> Registered(const std::function<void(config::PluginChoice&)>& unknown) {
  config::PluginChoice choice;
  unknown(choice);
  const absl::StatusOr<PluginSet> made = MakePlugins(choice);
  EXPECT_FALSE(made.ok());
  const std::string message(made.status().message());
  const std::size_t list = message.find("choose one of ");
  EXPECT_NE(list, std::string::npos) << message;
  std::set<std::string> names;
  std::stringstream rest(message.substr(list + 14));
  for (std::string name; std::getline(rest, name, ',');) {
    names.insert(name.substr(name.find_first_not_of(' ')));
  }
  return names;
}

// plugins/README.md's table is the one list of the built-in policies:
// every name it gives is registered and answers to it (each plugin's
// kName), and every registered name is in it.
TEST(PluginRegistryTest, TheReadmeListsEveryBuiltInPolicyAndNoOther) {
  const std::string readme = testing::ReadData("../../plugins/README.md");
  // Every `KIND/NAME` in backquotes, KIND a seam's folder.
  std::set<std::string> listed;
  for (std::size_t open = readme.find('`'); open != std::string::npos;) {
    const std::size_t close = readme.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string token = readme.substr(open + 1, close - open - 1);
    const std::string kind = token.substr(0, token.find('/'));
    const bool seam = kind == "priority" || kind == "filter" || kind == "score" ||
                      kind == "domain" || kind == "admission";
    if (seam && token.size() > kind.size() + 1 &&
        token.find_first_not_of("abcdefghijklmnopqrstuvwxyz-", kind.size() + 1) ==
            std::string::npos) {
      listed.insert(token);
    }
    open = readme.find('`', close + 1);
  }
  std::set<std::string> registered;
  for (const auto& unknown : std::vector<std::function<void(config::PluginChoice&)>>{
           [](config::PluginChoice& c) { c.queue_order = "priority/none"; },
           [](config::PluginChoice& c) {
             c.node_filter = {"filter/resources", "filter/none"};
           },
           [](config::PluginChoice& c) { c.node_score = "score/none"; },
           [](config::PluginChoice& c) { c.domain_score = "domain/none"; },
           [](config::PluginChoice& c) { c.admission = {"admission/none"}; }}) {
    registered.merge(Registered(unknown));
  }
  EXPECT_EQ(listed, registered);
  for (const std::string& each : listed) {
    config::PluginChoice choice;
    const std::string kind = each.substr(0, each.find('/'));
    std::string_view made;
    if (kind == "priority") choice.queue_order = each;
    if (kind == "filter" && each != "filter/resources") choice.node_filter.push_back(each);
    if (kind == "score") choice.node_score = each;
    if (kind == "domain") choice.domain_score = each;
    if (kind == "admission") choice.admission = {each};
    const absl::StatusOr<PluginSet> plugins = MakePlugins(choice);
    ASSERT_TRUE(plugins.ok()) << each << ": " << plugins.status();
    if (kind == "priority") made = plugins->queue_order->Name();
    if (kind == "filter") made = plugins->allocator.node_filters.back()->Name();
    if (kind == "score") made = plugins->allocator.node_score->Name();
    if (kind == "domain") made = plugins->allocator.domain_score->Name();
    if (kind == "admission") made = plugins->admission.front()->Name();
    EXPECT_EQ(made, each);
  }
}

TEST(PluginRegistryTest, UnknownNamesNameTheKeyAndTheKnownNames) {
  config::PluginChoice choice;
  choice.node_score = "score/packed";
  EXPECT_EQ(MakePlugins(choice).status(),
            absl::InvalidArgumentError("NodeScoreType=score/packed: no such plugin; choose one of "
                                       "score/locality, score/spread"));
  choice = {};
  choice.domain_score = "domain/nvlink";
  EXPECT_EQ(
      MakePlugins(choice).status(),
      absl::InvalidArgumentError("DomainScoreType=domain/nvlink: no such plugin; choose one of "
                                 "domain/tightest, domain/spread"));
  choice = {};
  choice.node_filter = {"filter/resources", "filter/healthy"};
  EXPECT_EQ(
      MakePlugins(choice).status(),
      absl::InvalidArgumentError("NodeFilterPlugins=filter/healthy: no such plugin; choose one of "
                                 "filter/resources, filter/keep-gpu-nodes"));
}

TEST(PluginRegistryTest, NodeFiltersMustBeginWithResourcesAndNotRepeat) {
  config::PluginChoice choice;
  for (const std::vector<std::string>& filters :
       {std::vector<std::string>{}, std::vector<std::string>{"filter/keep-gpu-nodes"},
        std::vector<std::string>{"filter/keep-gpu-nodes", "filter/resources"}}) {
    choice.node_filter = filters;
    const absl::Status status = MakePlugins(choice).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("must begin with filter/resources, which alone checks node "
                                    "state, free resources"),
              std::string_view::npos)
        << status;
  }
  choice.node_filter = {"filter/resources", "filter/keep-gpu-nodes", "filter/keep-gpu-nodes"};
  EXPECT_EQ(MakePlugins(choice).status(),
            absl::InvalidArgumentError(
                "NodeFilterPlugins=filter/resources,filter/keep-gpu-nodes,filter/keep-gpu-nodes: "
                "filter/keep-gpu-nodes is listed twice; list each filter once"));
  choice.node_filter = {"filter/resources", "filter/keep-gpu-nodes"};
  EXPECT_TRUE(MakePlugins(choice).ok());
}

TEST(PluginRegistryTest, AdmissionChecksComeInOrderOnceEach) {
  config::PluginChoice choice;
  choice.admission = {"admission/require-time-limit", "admission/limits"};
  const absl::StatusOr<PluginSet> plugins = MakePlugins(choice);
  ASSERT_TRUE(plugins.ok()) << plugins.status();
  ASSERT_EQ(plugins->admission.size(), 2U);
  EXPECT_EQ(plugins->admission[0]->Name(), "admission/require-time-limit");
  EXPECT_EQ(plugins->admission[1]->Name(), "admission/limits");
  const absl::StatusOr<PluginSet> defaults = MakePlugins(config::PluginChoice{});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  ASSERT_EQ(defaults->admission.size(), 1U);
  EXPECT_EQ(defaults->admission[0]->Name(), "admission/limits");

  choice.admission = {"admission/limits", "admission/quota"};
  EXPECT_EQ(MakePlugins(choice).status(),
            absl::InvalidArgumentError("AdmissionPlugins=admission/quota: no such plugin; choose "
                                       "one of admission/limits, admission/require-time-limit"));
  choice.admission = {"admission/limits", "admission/limits"};
  EXPECT_EQ(MakePlugins(choice).status(),
            absl::InvalidArgumentError("AdmissionPlugins=admission/limits,admission/limits: "
                                       "admission/limits is listed twice; list each admission "
                                       "policy once"));
}

// The admission check of that name, as MakePlugins makes it.
std::shared_ptr<const AdmissionCheck> CheckNamed(const std::string& name) {
  config::PluginChoice choice;
  choice.admission = {name};
  absl::StatusOr<PluginSet> plugins = MakePlugins(choice);
  EXPECT_TRUE(plugins.ok()) << plugins.status();
  return plugins.ok() ? plugins->admission.front() : nullptr;
}

// A resolved job of `uid` (account "ml") under QOS "normal" asking for
// `nodes` nodes of 8 GPUs, in partition "batch".
Job GpuJob(std::uint32_t uid, int nodes) {
  Job job;
  job.qos = "normal";
  job.request.uid = uid;
  job.request.account = "ml";
  job.request.partition = "batch";
  job.gang.nodes = nodes;
  job.gang.gpus_per_node = 8;
  job.time_limit = std::chrono::hours(1);
  return job;
}

TEST(PluginTest, LimitsAdmissionWaitsAtTheQosRunningLimits) {
  const auto limits = CheckNamed("admission/limits");
  ASSERT_NE(limits, nullptr);
  config::ClusterConfig config;
  config::QosSpec normal;
  normal.name = "normal";
  config.qos = {normal};
  EXPECT_FALSE(limits->MayMakeJobsWait(config)) << "no QOS limits running jobs";
  normal.max_jobs_per_user = 2;
  normal.max_gpus_per_user = 24;
  normal.max_gpus_per_account = 32;
  config.qos = {normal};
  EXPECT_TRUE(limits->MayMakeJobsWait(config));

  RunningTotals running;
  const AdmissionContext context{config, running, Millis(0)};
  EXPECT_TRUE(limits->CheckSubmit(context, GpuJob(1000, 4)).ok()) << "it refuses nothing";
  EXPECT_EQ(limits->Admit(context, GpuJob(1000, 3)), std::nullopt);

  running.Count(GpuJob(1000, 2), 1);  // alice runs 16 GPUs, her account 16
  std::optional<Wait> wait = limits->Admit(context, GpuJob(1000, 2));
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->reason, PendingReason::kQosMaxGpusPerUser);
  EXPECT_EQ(wait->detail,
            "QOS normal allows 24 GPUs per user (MaxGpusPerUser); 16 are in use and the job "
            "needs 16");
  EXPECT_EQ(limits->Admit(context, GpuJob(1000, 1)), std::nullopt) << "24 GPUs: at the limit";

  running.Count(GpuJob(2000, 1), 1);  // bob, same account: 24 GPUs in it
  wait = limits->Admit(context, GpuJob(2000, 2));
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->reason, PendingReason::kQosMaxGpusPerAccount);
  EXPECT_EQ(wait->detail,
            "QOS normal allows 32 GPUs per account (MaxGpusPerAccount); account ml uses 24 and "
            "the job needs 16");

  running.Count(GpuJob(1000, 0), 1);  // alice's second job
  wait = limits->Admit(context, GpuJob(1000, 0));
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->reason, PendingReason::kQosMaxJobsPerUser);
  EXPECT_EQ(wait->detail, "QOS normal allows 2 running jobs per user (MaxJobsPerUser)");
  running.Count(GpuJob(1000, 2), -1);  // her first ends
  EXPECT_EQ(limits->Admit(context, GpuJob(1000, 1)), std::nullopt);
}

TEST(PluginTest, RequireTimeLimitRefusesJobsWithoutOne) {
  const auto require = CheckNamed("admission/require-time-limit");
  ASSERT_NE(require, nullptr);
  config::ClusterConfig config;
  config::PartitionSpec batch;
  batch.name = "batch";
  batch.max_time = std::chrono::hours(24);  // a bound, not an estimate
  config.partitions = {batch};
  EXPECT_FALSE(require->MayMakeJobsWait(config));
  const RunningTotals running;
  const AdmissionContext context{config, running, Millis(0)};

  Job job = GpuJob(1000, 1);  // no --time: the limit in force is MaxTime
  job.time_limit = batch.max_time;
  EXPECT_EQ(require->CheckSubmit(context, job),
            absl::InvalidArgumentError(
                "time: the job has no time limit and partition batch has no DefaultTime; add "
                "--time=HH:MM:SS (#SBATCH --time) so backfill can plan around it"));
  EXPECT_EQ(require->Admit(context, job), std::nullopt);

  job.request.time_limit = std::chrono::minutes(30);  // --time=30
  job.time_limit = job.request.time_limit;
  EXPECT_TRUE(require->CheckSubmit(context, job).ok());

  job.request.time_limit = kUnlimited;  // --time=UNLIMITED where nothing bounds it
  job.time_limit = kUnlimited;
  EXPECT_EQ(require->CheckSubmit(context, job).code(), absl::StatusCode::kInvalidArgument);

  config.partitions[0].default_time = std::chrono::hours(2);  // DefaultTime=2:00:00
  job.request.time_limit = std::chrono::seconds(0);
  job.time_limit = std::chrono::hours(2);
  EXPECT_TRUE(require->CheckSubmit(context, job).ok());
}

// One leaf of four 64-CPU nodes: n001 half busy, n002 a quarter, the rest idle.
Cluster PartlyBusyLeaf() {
  Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(4).GpusPerNode(0).Build();
  Take(cluster, "n001", 32);
  Take(cluster, "n002", 16);
  return cluster;
}

TEST(PluginTest, SpreadScoreTakesTheEmptiestNodesWhereLocalityPacks) {
  Cluster cluster = PartlyBusyLeaf();
  config::PluginChoice spread;
  spread.node_score = "score/spread";
  EXPECT_EQ(Placed(cluster, {}, Cpus(2, 8)), "n[001-002]");
  EXPECT_EQ(Placed(cluster, spread, Cpus(2, 8)), "n[003-004]");
  // Among partly busy nodes, the one with more left wins.
  Take(cluster, "n[003-004]", 48);
  EXPECT_EQ(Placed(cluster, {}, Cpus(1, 8)), "n003");
  EXPECT_EQ(Placed(cluster, spread, Cpus(1, 8)), "n002");
}

// Three leaves of four nodes with 1, 3 and 4 free.
Cluster UnevenLeaves() {
  Cluster cluster = ClusterBuilder().Leaves(3).NodesPerLeaf(4).GpusPerNode(0).Build();
  Take(cluster, "n[001-003],n005", 64);
  return cluster;
}

TEST(PluginTest, SpreadDomainTakesTheEmptiestLeafWhereTightestFillsTheFullest) {
  const Cluster cluster = UnevenLeaves();
  config::PluginChoice spread;
  spread.domain_score = "domain/spread";
  EXPECT_EQ(Placed(cluster, {}, Cpus(2, 1)), "n[006-007]");
  EXPECT_EQ(Placed(cluster, spread, Cpus(2, 1)), "n[009-010]");
  // Wider than any leaf: two leaves either way; tightest keeps leaf1 whole.
  EXPECT_EQ(Placed(cluster, {}, Cpus(5, 1)), "n[004,009-012]");
  EXPECT_EQ(Placed(cluster, spread, Cpus(5, 1)), "n[006,009-012]");
  // A required node keeps its leaf in the gang; the rest comes from the
  // tightest or from the largest other leaf.
  GangRequest pinned = Cpus(2, 1);
  pinned.required_nodes = cluster.Nodes("n004");
  EXPECT_EQ(Placed(cluster, {}, pinned), "n[004,006]");
  EXPECT_EQ(Placed(cluster, spread, pinned), "n[004,009]");
}

// leaf0: four 8-GPU nodes; leaf1: four CPU-only nodes.
Cluster MixedCluster() {
  Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  for (config::NodeSpec& spec : cluster.nodes) {
    const topology::SwitchId leaf = cluster.topology.LeafOf(cluster.Node(spec.name));
    if (cluster.topology.GetSwitch(leaf).name == "leaf1") spec.gpus = 0;
  }
  absl::StatusOr<alloc::NodePool> pool =
      alloc::NodePool::Create(cluster.topology, cluster.nodes, {});
  EXPECT_TRUE(pool.ok()) << pool.status();
  cluster.pool = *std::move(pool);
  return cluster;
}

TEST(PluginTest, KeepGpuNodesSendsCpuJobsElsewhere) {
  Cluster cluster = MixedCluster();
  GangAllocator by_default = AllocatorFor(cluster, {});
  PlacementResult result = by_default.Place(Cpus(1, 1), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "n001") << "the first of two equal leaves";

  config::PluginChoice choice;
  choice.node_filter = {"filter/resources", "filter/keep-gpu-nodes"};
  GangAllocator keeping = AllocatorFor(cluster, choice);
  result = keeping.Place(Cpus(1, 1), cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "n005");
  GangRequest gpus = Cpus(2, 1);
  gpus.gpus_per_node = 8;
  result = keeping.Place(gpus, cluster.pool);
  ASSERT_EQ(result.outcome, Outcome::kPlaced) << result.reason;
  EXPECT_EQ(cluster.Names(result.placement), "n[001-002]");
  // Five CPU-only nodes do not exist: infeasible, and the reason says why.
  result = keeping.Place(Cpus(5, 1), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason,
            "only 4 of the 8 nodes of the cluster offer 1 CPUs per node; 4 more ruled out by "
            "filter/keep-gpu-nodes; the job asks for 5");
  GangRequest pinned = Cpus(1, 1);
  pinned.required_nodes = cluster.Nodes("n002");
  result = keeping.Place(pinned, cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kInfeasible);
  EXPECT_EQ(result.reason, "required node n002 is ruled out by filter/keep-gpu-nodes");
  // With a CPU-only node busy, four CPU-only nodes only wait.
  Take(cluster, "n005", 64);
  result = keeping.Place(Cpus(4, 1), cluster.pool);
  EXPECT_EQ(result.outcome, Outcome::kBusy);
  EXPECT_EQ(result.reason,
            "4 nodes needed, 3 of 4 free now (0 down, 0 drained, 1 busy; 4 more ruled out by "
            "filter/keep-gpu-nodes)");
}

}  // namespace
}  // namespace cohort::plugin
