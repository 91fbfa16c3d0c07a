// SPDX-License-Identifier: Apache-2.0
// `cohort-sim`: replays a job trace on the real engine in virtual time, or
// generates a synthetic trace (--generate).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "cluster_files.h"
#include "scenario.h"
#include "simulator.h"
#include "trace.h"
#include "trace_generator.h"

namespace {

int Fail(std::string_view message) {
  std::cerr << "cohort-sim: error: " << message << "\n";
  return 1;
}
int Fail(const absl::Status& status) { return Fail(std::string_view(status.message())); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cohort-sim: replays a job trace (CSV, docs/simulator.md) on Cohort's real scheduling "
      "engine in virtual time over a cohort.conf and a topology.conf, and reports utilisation, "
      "waits, bounded slowdown, preemptions and placement quality. With --generate, writes a "
      "synthetic trace instead.",
      "cohort-sim"};
  app.set_version_flag("--version", "cohort-sim 0.1.0");
  std::string config_file;
  std::string topology_file;
  std::string trace_file;
  bool json = false;
  bool jobs = false;
  int tick = 60;
  std::int64_t horizon = 0;
  bool check = false;
  bool generate = false;
  std::string output;
  double days = 7;
  cohort::sim::GeneratorOptions gen;
  gen.cluster_nodes = 0;
  gen.gpus_per_node = -1;
  app.add_option("-c,--config", config_file, "cohort.conf: nodes, partitions, limits")
      ->check(CLI::ExistingFile);
  app.add_option("-t,--topology", topology_file,
                 "topology.conf (default: TopologyFile= of the config, else beside it)")
      ->check(CLI::ExistingFile);
  app.add_option("--trace", trace_file, "the job trace to replay (CSV)")->check(CLI::ExistingFile);
  std::string script_file;
  app.add_option("--script", script_file,
                 "a scenario to play (a cluster and what happens to it, a line each; "
                 "docs/simulator.md, \"Scenarios\"): prints what the engine decided")
      ->check(CLI::ExistingFile);
  app.add_flag("--json", json, "print the report as JSON");
  app.add_flag("--jobs", jobs, "with --json: add every job's outcome");
  app.add_option("--tick", tick, "seconds of virtual time between engine ticks (time limits)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--horizon", horizon, "stop after this many seconds of virtual time (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--check-invariants", check,
               "check the engine's invariants after every instant of virtual time (slower)");
  app.add_flag("--generate", generate, "write a synthetic trace instead of replaying one");
  app.add_option("-o,--output", output, "with --generate: the file to write (default: stdout)");
  app.add_option("--seed", gen.seed, "with --generate: random seed")->capture_default_str();
  app.add_option("--days", days, "with --generate: days of submissions")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cluster-nodes", gen.cluster_nodes,
                 "with --generate: cluster size (default: the -c/-t cluster's, else 1024)");
  app.add_option("--gpus-per-node", gen.gpus_per_node,
                 "with --generate: GPUs per node (default: the -c cluster's first node's, else 8)");
  app.add_option("--load", gen.load, "with --generate: offered GPU-hours over available")
      ->capture_default_str();
  app.add_option("--pretrain-share", gen.pretrain_share, "with --generate: share of the load")
      ->capture_default_str();
  app.add_option("--finetune-share", gen.finetune_share, "with --generate: share of the load")
      ->capture_default_str();
  app.add_option("--sweep-share", gen.sweep_share, "with --generate: share of the load")
      ->capture_default_str();
  app.add_option("--users", gen.users, "with --generate: number of users")->capture_default_str();
  app.add_option("--partition", gen.partition, "with --generate: partition of every job");
  app.add_option("--segment", gen.segment,
                 "with --generate: gangs of at least S nodes in segments of S (NVLink blocks)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (!script_file.empty()) {
    absl::StatusOr<std::string> text = cohort::shell::ReadFile(script_file);
    if (!text.ok()) return Fail(text.status());
    absl::StatusOr<std::string> transcript = cohort::sim::RunScenario(*text, script_file);
    if (!transcript.ok()) return Fail(transcript.status());
    std::cout << *transcript;
    return 0;
  }

  std::optional<cohort::shell::LoadedCluster> cluster;
  if (!config_file.empty() || !topology_file.empty()) {
    cohort::shell::ClusterPaths paths;
    if (!config_file.empty()) paths.config = config_file;
    if (!topology_file.empty()) paths.topology = topology_file;
    cluster = cohort::shell::LoadCluster(paths);
    if (!cohort::shell::ReportDiagnostics(*cluster) || !cluster->pool) {
      return Fail("the cluster files have errors (above); fix them and run again");
    }
  }

  if (generate) {
    if (gen.cluster_nodes == 0) gen.cluster_nodes = cluster ? cluster->topology.NodeCount() : 1024;
    if (gen.gpus_per_node < 0) {
      gen.gpus_per_node =
          cluster && cluster->pool->NodeCount() > 0 ? cluster->pool->Capacity(0).gpus : 8;
    }
    gen.duration = std::chrono::seconds(static_cast<std::int64_t>(days * 86400));
    absl::StatusOr<std::vector<cohort::sim::TraceJob>> trace = cohort::sim::GenerateTrace(gen);
    if (!trace.ok()) return Fail(trace.status());
    const std::string text = cohort::sim::FormatTrace(*trace);
    if (output.empty()) {
      std::cout << text;
    } else {
      std::ofstream file(output);
      file << text;
      if (!file.flush()) return Fail("cannot write " + output + "; pass a writable -o path");
      std::cerr << "cohort-sim: wrote " << trace->size() << " jobs to " << output << "\n";
    }
    return 0;
  }

  if (trace_file.empty()) return Fail("--trace FILE is needed (or --generate to write one)");
  if (!cluster) return Fail("-c cohort.conf (and -t topology.conf) are needed to replay a trace");
  absl::StatusOr<std::string> text = cohort::shell::ReadFile(trace_file);
  if (!text.ok()) return Fail(text.status());
  absl::StatusOr<std::vector<cohort::sim::TraceJob>> trace =
      cohort::sim::ParseTrace(*text, trace_file);
  if (!trace.ok()) return Fail(trace.status());
  cohort::sim::SimOptions options;
  options.tick = std::chrono::seconds(tick);
  options.horizon = std::chrono::seconds(horizon);
  options.check_invariants = check;
  absl::StatusOr<cohort::sim::SimReport> report =
      cohort::sim::Simulate(cluster->config, cluster->topology, *cluster->pool, *trace, options);
  if (!report.ok()) return Fail(report.status());
  std::cout << (json ? cohort::sim::ReportJson(*report, jobs) : cohort::sim::FormatReport(*report));
  return 0;
}
