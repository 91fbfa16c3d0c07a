// SPDX-License-Identifier: Apache-2.0
// cohort-sim's library (tools/sim): the trace format, the replay on the real
// engine, and the trace generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cluster_files.h"
#include "cohort/text/slurm_time.h"
#include "simulator.h"
#include "test_support.h"
#include "trace.h"
#include "trace_generator.h"

namespace cohort::sim {
namespace {

using std::chrono::seconds;

TEST(TraceTest, ParsesColumnsInAnyOrderAndSlurmTimes) {
  const std::string text =
      "# a comment\n"
      "nodes,user,account,submit_time,gpus_per_node,runtime,time_limit,qos,partition\n"
      "4,alice,ml,10,8,3600,2-00:00:00,high,train\n"
      "\n"
      "1, bob ,ml,0,1,60,90,,\n"
      "2,carol,ml,5,8,60,UNLIMITED,low,\n";
  absl::StatusOr<std::vector<TraceJob>> jobs = ParseTrace(text, "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3U);
  EXPECT_EQ((*jobs)[0].nodes, 4);
  EXPECT_EQ((*jobs)[0].submit_time, seconds(10));
  EXPECT_EQ((*jobs)[0].time_limit, seconds(2 * 86400));
  EXPECT_EQ((*jobs)[0].qos, "high");
  EXPECT_EQ((*jobs)[0].partition, "train");
  EXPECT_EQ((*jobs)[1].user, "bob");
  // A plain number is seconds, not Slurm's minutes.
  EXPECT_EQ((*jobs)[1].time_limit, seconds(90));
  EXPECT_EQ((*jobs)[2].time_limit, kUnlimited);
  absl::StatusOr<std::vector<TraceJob>> again = ParseTrace(FormatTrace(*jobs), "round.csv");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 3U);
  EXPECT_EQ((*again)[2].time_limit, kUnlimited);
  EXPECT_EQ((*again)[0].runtime, seconds(3600));
}

TEST(TraceTest, ErrorsNameTheLineAndColumn) {
  const std::string header(kTraceHeader);
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"submit_time,user,acount\n", "t.csv:1: acount: not a trace column"},
      {"submit_time,user,account\n", "nodes: missing from the header"},
      {header + "\n0,alice,ml,,0,8,60,60,\n", "t.csv:2: nodes: \"0\""},
      {header + "\n0,alice,ml,,1,8,-5,60,\n", "t.csv:2: runtime:"},
      {header + "\n0,alice,ml,,1,8,60,soon,\n", "t.csv:2: time_limit: \"soon\""},
      {header + "\n0,alice,ml,,1,8,60\n", "has 7 fields but the header names 9"},
      {header + "\n0,,ml,,1,8,60,60,\n", "user: is empty"},
      {"", "no header line"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<TraceJob>> jobs = ParseTrace(c.text, "t.csv");
    ASSERT_FALSE(jobs.ok()) << c.text;
    EXPECT_NE(jobs.status().message().find(c.expected), std::string_view::npos)
        << jobs.status().message() << " should hold " << c.expected;
  }
}

// 2 leaves of 4 nodes of 8 GPUs under one spine; default partition.
class SimulateTest : public ::testing::Test {
 protected:
  SimulateTest() : cluster_(testing::ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build()) {
    config_.nodes = cluster_.nodes;
    config::PartitionSpec all;
    all.name = "all";
    all.is_default = true;
    all.nodes = cluster_.topology.NodeNames();
    config_.partitions = {all};
  }

  SimReport Run(const std::vector<TraceJob>& trace) {
    SimOptions options;
    options.tick = seconds(10);
    options.check_invariants = true;
    const alloc::NodePool pool =
        alloc::NodePool::Create(cluster_.topology, config_.nodes, config_.partitions).value();
    absl::StatusOr<SimReport> report = Simulate(config_, cluster_.topology, pool, trace, options);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : SimReport{};
  }

  static TraceJob Job(int submit, int nodes, int runtime, int limit) {
    TraceJob job;
    job.submit_time = seconds(submit);
    job.user = "alice";
    job.account = "ml";
    job.nodes = nodes;
    job.gpus_per_node = 8;
    job.runtime = seconds(runtime);
    job.time_limit = seconds(limit);
    return job;
  }

  config::ClusterConfig config_;
  testing::Cluster cluster_;
};

TEST_F(SimulateTest, JobsRunInVirtualTimeAndWaitForEachOther) {
  // The 8-node job needs the whole cluster: it waits for the 4-node one.
  const SimReport r = Run({Job(0, 4, 100, 1000), Job(10, 8, 50, 1000), Job(20, 1, 30, 1000)});
  ASSERT_EQ(r.outcomes.size(), 3U);
  EXPECT_EQ(r.finished, 3U) << r.outcomes[0].reason;
  EXPECT_EQ(r.unfinished, 0U);
  EXPECT_EQ(r.states.at("COMPLETED"), 3U);
  EXPECT_EQ(r.outcomes[0].start, seconds(0));
  EXPECT_EQ(r.outcomes[0].end, seconds(100));
  EXPECT_EQ(r.outcomes[1].start, seconds(100));
  EXPECT_EQ(r.outcomes[1].end, seconds(150));
  // Strict order in the partition: the 1-node job waits behind the 8-node one.
  EXPECT_EQ(r.outcomes[2].start, seconds(150));
  EXPECT_EQ(r.outcomes[0].leaves, 1);
  EXPECT_EQ(r.outcomes[0].optimal_leaves, 1);
  EXPECT_EQ(r.outcomes[1].leaves, 2);
  EXPECT_EQ(r.outcomes[1].level, 1);
  EXPECT_EQ(r.multi_node_jobs, 2U);
  EXPECT_DOUBLE_EQ(r.optimal_share, 1.0);
  // GPU-seconds: 32*100 + 64*50 + 8*30 over 64 GPUs * 180 s.
  EXPECT_NEAR(r.utilisation, (3200.0 + 3200.0 + 240.0) / (64.0 * 180.0), 1e-9);
  EXPECT_DOUBLE_EQ(r.wait_p50_s, 90.0);
  EXPECT_EQ(r.preempted_jobs, 0U);
  EXPECT_GT(r.invariant_checks, 0U);
}

TEST_F(SimulateTest, ALimitEndsTheJobAtTheNextTickAndBadJobsAreRefused) {
  TraceJob too_big = Job(0, 9, 10, 100);
  const SimReport r = Run({Job(0, 2, 500, 60), too_big});
  EXPECT_EQ(r.outcomes[0].state, JobState::kTimeout);
  // The limit is 60 s; ticks come every 10 s.
  EXPECT_EQ(r.outcomes[0].end, seconds(60));
  EXPECT_EQ(r.refused, 1U);
  EXPECT_EQ(r.outcomes[1].id, 0);
  EXPECT_FALSE(r.outcomes[1].reason.empty());
  EXPECT_EQ(r.states.at("TIMEOUT"), 1U);
}

TEST(TraceGeneratorTest, SameSeedSameTraceWithEveryKind) {
  GeneratorOptions options;
  options.duration = seconds(2 * 86400);
  options.cluster_nodes = 512;
  absl::StatusOr<std::vector<TraceJob>> a = GenerateTrace(options);
  absl::StatusOr<std::vector<TraceJob>> b = GenerateTrace(options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(FormatTrace(*a), FormatTrace(*b));
  options.seed = 2;
  EXPECT_NE(FormatTrace(*GenerateTrace(options)), FormatTrace(*a));
  EXPECT_TRUE(std::is_sorted(a->begin(), a->end(), [](const TraceJob& x, const TraceJob& y) {
    return x.submit_time < y.submit_time;
  }));
  std::map<std::string, int> by_qos;
  for (const TraceJob& job : *a) {
    ++by_qos[job.qos];
    EXPECT_LE(job.nodes, 512);
    EXPECT_LT(job.submit_time, seconds(2 * 86400 + 1000));
    if (job.qos == "high") {
      EXPECT_GE(job.nodes, 64);
    }
    if (job.qos == "low") {
      EXPECT_EQ(job.gpus_per_node, 1);
    }
  }
  EXPECT_GT(by_qos["high"], 0);
  EXPECT_GT(by_qos["normal"], by_qos["high"]);
  EXPECT_GT(by_qos["low"], by_qos["normal"]);
  options.load = 0;
  EXPECT_FALSE(GenerateTrace(options).ok());
}

// A shipped cluster: traces/NAME.conf over topologies/NAME.conf.
shell::LoadedCluster LoadShipped(const std::string& name) {
  shell::ClusterPaths paths;
  paths.config = testing::DataPath("traces/" + name + ".conf");
  paths.topology = testing::DataPath("topologies/" + name + ".conf");
  return shell::LoadCluster(paths);
}

// --segment on the GB200 layout (8 blocks of 18): Cohort keeps each segment
// in a block; first fit, on the same free nodes, takes them in node order.
TEST(SegmentTraceTest, SegmentsStayInBlocksWhereFirstFitWouldSplitThem) {
  const shell::LoadedCluster cluster = LoadShipped("gb200-nvl72");
  ASSERT_FALSE(cluster.diagnostics.HasErrors()) << cluster.diagnostics.Format();
  const std::string text =
      "submit_time,user,account,nodes,gpus_per_node,runtime,time_limit,segment\n"
      "0,alice,ml,9,4,1000,2000,\n"
      "1,bob,ml,36,4,100,2000,18\n";
  absl::StatusOr<std::vector<TraceJob>> trace = ParseTrace(text, "segments.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ((*trace)[1].segment, 18);
  EXPECT_NE(FormatTrace(*trace).find(",segment\n"), std::string::npos);
  SimOptions options;
  options.check_invariants = true;
  absl::StatusOr<SimReport> report =
      Simulate(cluster.config, cluster.topology, *cluster.pool, *trace, options);
  ASSERT_TRUE(report.ok()) << report.status();
  const JobOutcome& job = report->outcomes[1];
  EXPECT_EQ(job.start, seconds(1));
  EXPECT_EQ(job.split_segments, 0);
  // First fit: gb[010-027] and gb[028-045], each across two racks.
  EXPECT_EQ(job.first_fit_split_segments, 2);
  EXPECT_EQ(report->segment_jobs, 1U);
  EXPECT_DOUBLE_EQ(report->segment_whole_share, 1.0);
  EXPECT_DOUBLE_EQ(report->first_fit_whole_share, 0.0);
  EXPECT_NE(FormatReport(*report).find("segment jobs         1: no segment split across blocks "
                                       "100.0 %; first fit on the same free nodes 0.0 % (of 1)"),
            std::string::npos)
      << FormatReport(*report);

  const absl::StatusOr<std::vector<TraceJob>> bad = ParseTrace(
      "submit_time,user,account,nodes,gpus_per_node,runtime,time_limit,segment\n"
      "0,alice,ml,20,4,10,20,18\n",
      "bad.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.csv:2: segment: \"18\" is not a segment size that "
                                        "divides the job's 20 nodes"),
            std::string_view::npos)
      << bad.status().message();
}

TEST(TraceGeneratorTest, SegmentRoundsGangsToWholeSegments) {
  GeneratorOptions options;
  options.duration = seconds(2 * 86400);
  options.cluster_nodes = 144;
  options.gpus_per_node = 4;
  options.segment = 18;
  absl::StatusOr<std::vector<TraceJob>> trace = GenerateTrace(options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  int segmented = 0;
  for (const TraceJob& job : *trace) {
    EXPECT_LE(job.nodes, 144);
    if (job.nodes >= 18) {
      EXPECT_EQ(job.segment, 18);
      EXPECT_EQ(job.nodes % 18, 0) << job.nodes;
      ++segmented;
    } else {
      EXPECT_EQ(job.segment, 0);
    }
  }
  EXPECT_GT(segmented, 0);
  options.segment = -1;
  EXPECT_FALSE(GenerateTrace(options).ok());
}

// The shipped example trace on the shipped 1,024-node cluster: every job
// ends, the figures are sane and the invariants hold throughout.
TEST(ExampleTraceTest, ReplaysToTheEnd) {
  const shell::LoadedCluster cluster = LoadShipped("fat-tree-1024");
  ASSERT_FALSE(cluster.diagnostics.HasErrors()) << cluster.diagnostics.Format();
  ASSERT_TRUE(cluster.pool.has_value());
  absl::StatusOr<std::vector<TraceJob>> trace =
      ParseTrace(testing::ReadData("traces/example-1024.csv"), "example-1024.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_GT(trace->size(), 100U);
  SimOptions options;
  options.check_invariants = true;
  absl::StatusOr<SimReport> report =
      Simulate(cluster.config, cluster.topology, *cluster.pool, *trace, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->finished, trace->size()) << FormatReport(*report);
  EXPECT_EQ(report->refused, 0U);
  EXPECT_GT(report->utilisation, 0.0);
  EXPECT_LE(report->utilisation, 1.0);
  EXPECT_GT(report->multi_node_jobs, 0U);
  EXPECT_GE(report->optimal_share, 0.0);
  EXPECT_LE(report->optimal_share, 1.0);
  EXPECT_LE(report->wait_p50_s, report->wait_p90_s);
  EXPECT_LE(report->wait_p90_s, report->wait_p99_s);
  EXPECT_GE(report->bounded_slowdown_mean, 1.0);
  for (const JobOutcome& o : report->outcomes) {
    EXPECT_GE(o.start, o.submit) << "job " << o.trace_index;
    EXPECT_GE(o.end, o.start) << "job " << o.trace_index;
    EXPECT_GE(o.leaves, o.optimal_leaves) << "job " << o.trace_index;
  }
  EXPECT_NE(ReportJson(*report, false).find("\"utilisation\""), std::string::npos);
}

}  // namespace
}  // namespace cohort::sim
