// SPDX-License-Identifier: Apache-2.0
// The scheduling engine alone at the scale of bench/scale/run.sh: the same
// 16,384-node three-level fat tree and 100,000 queued jobs of 1 to 256
// nodes, without gRPC, the store or agents. It times what the controller's
// state thread spends in the engine: a submission, a scheduling pass (after
// a submission that cannot start, and after a 256-node job ends and frees its
// nodes), a Tick, and the engine's resident memory. The end-to-end run
// (bench/scale/run.sh) adds the RPCs and the store to these.
//
//   engine_scale [--nodes 16384] [--jobs 100000] [--samples 30] [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cluster_files.h"
#include "cohort/engine/engine.h"

namespace {

using cohort::Effects;
using cohort::Engine;
using cohort::JobId;
using cohort::Millis;
using Clock = std::chrono::steady_clock;

constexpr int kPerLeaf = 32;
constexpr int kLeavesPerSpine = 16;
constexpr int kHolders = 64;  // 256-node jobs that hold the whole 16,384-node cluster

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Summary {
  double p50 = 0, p99 = 0, max = 0;
  std::size_t n = 0;
};

Summary Summarise(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    const auto rank = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[rank];
  };
  s.p50 = at(0.5);
  s.p99 = at(0.99);
  s.max = v.back();
  s.n = v.size();
  return s;
}

long RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

std::string WriteCluster(int nodes) {
  char dir_template[] = "/tmp/cohort-engine-scale.XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
  const int leaves = nodes / kPerLeaf;
  const int spines = (leaves + kLeavesPerSpine - 1) / kLeavesPerSpine;
  std::ofstream topo(std::string(dir) + "/topology.conf");
  for (int l = 0; l < leaves; ++l) {
    topo << fmt::format("SwitchName=leaf{:03} Nodes=gpu[{:05}-{:05}]\n", l, l * kPerLeaf + 1,
                        (l + 1) * kPerLeaf);
  }
  for (int s = 0; s < spines; ++s) {
    const int last = std::min((s + 1) * kLeavesPerSpine - 1, leaves - 1);
    topo << fmt::format("SwitchName=spine{:02} Switches=leaf[{:03}-{:03}]\n", s,
                        s * kLeavesPerSpine, last);
  }
  topo << fmt::format("SwitchName=core Switches=spine[00-{:02}]\n", spines - 1);
  std::ofstream conf(std::string(dir) + "/cohort.conf");
  conf << "ClusterName=scale\n"
       << "StateDir=" << dir << "/state\n"
       << "TopologyFile=" << dir << "/topology.conf\n"
       << fmt::format("NodeName=gpu[00001-{:05}] CPUs=224 MemoryMB=2000000 Gpus=8\n", nodes)
       << "PartitionName=train Nodes=ALL Default=YES MaxTime=UNLIMITED\n";
  return dir;
}

cohort::JobRequest Request(int nodes, std::mt19937_64& rng) {
  static const std::vector<std::string> kAccounts = {"vision", "speech", "nlp", "rl", "infra"};
  cohort::JobRequest r;
  const int user = static_cast<int>(rng() % 50);
  r.user_name = fmt::format("user{:02}", user);
  r.uid = 2000 + static_cast<std::uint32_t>(user);
  r.account = kAccounts[static_cast<std::size_t>(user) % kAccounts.size()];
  r.name = fmt::format("job{}", rng() % 1000);
  r.nodes = nodes;
  r.gpus_per_node = 8;
  r.tasks_per_node = 8;
  r.cpus_per_task = 16;
  r.exclusivity = cohort::alloc::Exclusivity::kExclusive;
  r.time_limit = std::chrono::minutes(60 + static_cast<int>(rng() % (23 * 60)));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The scheduling engine alone at 16,384 nodes and 100,000 queued jobs"};
  int nodes = 16384;
  int jobs = 100000;
  int samples = 30;
  std::string json_path;
  app.add_option("--nodes", nodes, "cluster size, a multiple of 32")->check(CLI::PositiveNumber);
  app.add_option("--jobs", jobs, "jobs queued behind the full cluster")->check(CLI::PositiveNumber);
  app.add_option("--samples", samples, "passes timed per case")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the results as JSON here");
  CLI11_PARSE(app, argc, argv);
  if (nodes % kPerLeaf != 0 || nodes < kHolders * 4) {
    fmt::print(stderr, "--nodes must be a multiple of {} and at least {}\n", kPerLeaf,
               kHolders * 4);
    return 2;
  }

  const std::string dir = WriteCluster(nodes);
  cohort::shell::ClusterPaths paths;
  paths.config = dir + "/cohort.conf";
  cohort::shell::LoadedCluster cluster = cohort::shell::LoadCluster(paths);
  if (!cohort::shell::ReportDiagnostics(cluster) || !cluster.pool) return 1;
  const long rss_before = RssKib();
  Engine engine(cluster.config, cluster.topology, *cluster.pool);

  Millis now{1'700'000'000'000};
  Effects effects;
  for (cohort::NodeId node = 0; node < cluster.topology.NodeCount(); ++node) {
    const cohort::alloc::NodeCapacity& capacity = cluster.pool->Capacity(node);
    cohort::NodeReport report;
    report.cpus = capacity.cpus;
    report.memory_mb = capacity.memory_mb;
    report.gpus = capacity.gpus;
    report.gpu_groups = capacity.gpu_groups;
    if (!engine.NodeRegistered(node, report, now, effects).ok()) return 1;
  }
  std::mt19937_64 rng(7);
  const int holder_nodes = nodes / kHolders;
  std::vector<JobId> holders;
  for (int i = 0; i < kHolders; ++i) {
    cohort::JobRequest r = Request(holder_nodes, rng);
    r.time_limit = std::chrono::hours(48);
    absl::StatusOr<JobId> id = engine.Submit(std::move(r), now, effects);
    if (!id.ok()) return 1;
    holders.push_back(*id);
  }
  engine.Schedule(now, effects);

  // Sizes 1, 2, 4 … 256 with the weights of bench/scale/run.sh.
  const std::vector<int> weights = {40, 10, 12, 12, 10, 8, 5, 2, 1};
  std::discrete_distribution<int> size(weights.begin(), weights.end());
  std::vector<double> submit_ms;
  submit_ms.reserve(static_cast<std::size_t>(jobs));
  const auto fill_started = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    now += Millis{1};
    cohort::JobRequest r = Request(1 << size(rng), rng);
    Effects e;
    const auto t0 = Clock::now();
    absl::StatusOr<JobId> id = engine.Submit(std::move(r), now, e);
    submit_ms.push_back(Ms(Clock::now() - t0));
    if (!id.ok()) {
      fmt::print(stderr, "submit failed: {}\n", id.status().ToString());
      return 1;
    }
  }
  const double fill_s = std::chrono::duration<double>(Clock::now() - fill_started).count();

  auto timed_pass = [&](std::vector<double>& out) {
    Effects e;
    const auto t0 = Clock::now();
    engine.Schedule(now, e);
    out.push_back(Ms(Clock::now() - t0));
    return e;
  };
  std::vector<double> first;
  timed_pass(first);

  // A pass after one more submission that cannot start: the steady state of
  // a full cluster with jobs arriving.
  std::vector<double> after_submit;
  for (int i = 0; i < samples; ++i) {
    now += Millis{100};
    Effects e;
    if (!engine.Submit(Request(1 << size(rng), rng), now, e).ok()) return 1;
    timed_pass(after_submit);
  }

  // A pass after a 256-node job ends: its nodes go to the queue's best jobs.
  std::vector<double> after_end;
  std::size_t started = 0;
  for (int i = 0; i < samples && i < kHolders; ++i) {
    now += Millis{1000};
    const cohort::Job* job = engine.FindJob(holders[static_cast<std::size_t>(i)]);
    if (job == nullptr) return 1;
    std::vector<cohort::NodeId> held;
    for (const auto& g : job->run.placement.grants) held.push_back(g.node);
    const int tasks = job->gang.tasks_per_node;
    Effects e;
    for (const cohort::NodeId n : held) {
      for (int t = 0; t < tasks; ++t)
        engine.RankExited(holders[static_cast<std::size_t>(i)], n, 0, 0, now, e);
    }
    for (const cohort::NodeId n : held)
      engine.JobReleased(holders[static_cast<std::size_t>(i)], n, now, e);
    const Effects pass = timed_pass(after_end);
    started += static_cast<std::size_t>(std::count_if(
        pass.commands.begin(), pass.commands.end(),
        [](const cohort::Command& c) { return std::holds_alternative<cohort::LaunchCommand>(c); }));
  }

  std::vector<double> ticks;
  for (int i = 0; i < samples; ++i) {
    now += Millis{1000};
    Effects e;
    const auto t0 = Clock::now();
    engine.Tick(now, e);
    ticks.push_back(Ms(Clock::now() - t0));
  }

  // The clock's full pass: while jobs wait, the queue is ordered afresh at
  // least every 30 s (priorities drift with age and usage), over all of it.
  std::vector<double> clock_passes;
  for (int i = 0; i < samples; ++i) {
    now += std::chrono::seconds(31);
    Effects e;
    engine.Tick(now, e);
    timed_pass(clock_passes);
  }

  const Summary submit = Summarise(submit_ms);
  const Summary idle = Summarise(after_submit);
  const Summary freed = Summarise(after_end);
  const Summary tick = Summarise(ticks);
  const long rss = RssKib();
  fmt::print("engine alone: {} nodes, {} jobs queued ({} pending at the end)\n", nodes, jobs,
             engine.PendingCount());
  fmt::print("  fill: {:.1f} s ({:.0f} submissions/s)\n", fill_s, jobs / fill_s);
  fmt::print("  {:<44} {:>9} {:>9} {:>9}\n", "ms", "p50", "p99", "max");
  auto row = [](const char* what, const Summary& s) {
    fmt::print("  {:<44} {:>9.3f} {:>9.3f} {:>9.3f}\n", what, s.p50, s.p99, s.max);
  };
  row("Submit", submit);
  row("first pass over the full queue", Summarise(first));
  row("pass after a submission that waits", idle);
  row("pass after a 256-node job ends", freed);
  row("Tick", tick);
  row("the clock's full pass (every 30 s)", Summarise(clock_passes));
  fmt::print("  jobs started by the {} passes after an end: {}\n", freed.n, started);
  fmt::print("  resident memory: {} MiB (engine and cluster {} MiB)\n", rss / 1024,
             (rss - rss_before) / 1024);
  if (!json_path.empty()) {
    auto js = [](const Summary& s) {
      return nlohmann::json{{"p50_ms", s.p50}, {"p99_ms", s.p99}, {"max_ms", s.max}, {"n", s.n}};
    };
    nlohmann::json out = {{"nodes", nodes},
                          {"jobs", jobs},
                          {"fill_s", fill_s},
                          {"submit", js(submit)},
                          {"first_pass", js(Summarise(first))},
                          {"pass_after_submit", js(idle)},
                          {"pass_after_end", js(freed)},
                          {"tick", js(tick)},
                          {"clock_full_pass", js(Summarise(clock_passes))},
                          {"started_after_ends", started},
                          {"rss_mib", rss / 1024}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
