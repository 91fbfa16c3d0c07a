// SPDX-License-Identifier: Apache-2.0
#include "trace_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace cohort::sim {
namespace {

using std::chrono::seconds;

constexpr std::int64_t kHour = 3600;
constexpr std::int64_t kDay = 24 * kHour;
// Draws used to estimate a kind's mean GPU-seconds per arrival.
constexpr int kMeanSamples = 20000;

enum class Kind { kPretrain, kFinetune, kSweep };

std::int64_t RoundUp(std::int64_t value, std::int64_t unit) {
  return (value + unit - 1) / unit * unit;
}

class Drawer {
 public:
  Drawer(const GeneratorOptions& options, std::uint64_t seed) : options_(options), rng_(seed) {}

  std::int64_t LogNormal(double median_s, double sigma, std::int64_t low, std::int64_t high) {
    std::lognormal_distribution<double> d(std::log(median_s), sigma);
    return std::clamp(static_cast<std::int64_t>(d(rng_)), low, high);
  }
  int Pick(std::initializer_list<int> values, std::initializer_list<double> weights) {
    std::discrete_distribution<int> d(weights);
    return *(values.begin() + d(rng_));
  }
  double Uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }
  int UniformInt(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  double Exponential(double rate) { return std::exponential_distribution<double>(rate)(rng_); }

  /// The user of a kind: a fixed slice of the users for each account.
  std::string User(Kind kind) {
    const int users = std::max(options_.users, 3);
    const int pretrain = std::max(users / 6, 1);
    const int finetune = std::max(users / 3, 1);
    const int sweep = std::max(users - pretrain - finetune, 1);
    switch (kind) {
      case Kind::kPretrain:
        return fmt::format("user{:02}", UniformInt(0, pretrain - 1));
      case Kind::kFinetune:
        return fmt::format("user{:02}", pretrain + UniformInt(0, finetune - 1));
      case Kind::kSweep:
        break;
    }
    return fmt::format("user{:02}", pretrain + finetune + UniformInt(0, sweep - 1));
  }

  // --segment S: a gang of at least S nodes in whole segments of S.
  void Segment(TraceJob& job) const {
    const int s = options_.segment;
    if (s <= 0 || job.nodes < s || options_.cluster_nodes < s) return;
    job.nodes = std::min((job.nodes + s - 1) / s, options_.cluster_nodes / s) * s;
    job.segment = s;
  }

  /// One arrival of a kind: a job, or a swarm of sweep jobs, from `at`.
  void Arrival(Kind kind, std::int64_t at, std::vector<TraceJob>& out) {
    const int gpus = options_.gpus_per_node;
    TraceJob job;
    job.submit_time = seconds(at);
    job.partition = options_.partition;
    job.user = User(kind);
    switch (kind) {
      case Kind::kPretrain: {
        job.account = "foundation";
        job.qos = "high";
        job.nodes = std::min(Pick({64, 128, 256}, {5, 3, 2}), options_.cluster_nodes);
        job.gpus_per_node = gpus;
        const std::int64_t runtime = LogNormal(18.0 * kHour, 0.6, 2 * kHour, 6 * kDay);
        job.runtime = seconds(runtime);
        job.time_limit = seconds(std::min(RoundUp(runtime * 13 / 10, kDay), 7 * kDay));
        Segment(job);
        out.push_back(job);
        return;
      }
      case Kind::kFinetune: {
        job.account = "applied";
        job.qos = "normal";
        job.nodes = std::min(Pick({4, 8, 16}, {2, 2, 1}), options_.cluster_nodes);
        job.gpus_per_node = gpus;
        const std::int64_t runtime = LogNormal(3.0 * kHour, 0.8, 600, 2 * kDay);
        job.runtime = seconds(runtime);
        job.time_limit = UniformInt(1, 20) == 1 ? seconds(runtime * 8 / 10)
                                                : seconds(RoundUp(runtime * 3 / 2, kHour));
        Segment(job);
        out.push_back(job);
        return;
      }
      case Kind::kSweep: {
        job.account = "research";
        job.qos = "low";
        job.nodes = 1;
        job.gpus_per_node = std::min(gpus, 1);
        job.time_limit = seconds(4 * kHour);
        const int swarm = UniformInt(20, 200);
        std::int64_t t = at;
        for (int i = 0; i < swarm; ++i) {
          job.submit_time = seconds(t);
          job.runtime = seconds(LogNormal(15.0 * 60, 0.7, 60, 4 * kHour));
          out.push_back(job);
          t += UniformInt(1, 5);
        }
        return;
      }
    }
  }

 private:
  const GeneratorOptions& options_;
  std::mt19937_64 rng_;
};

double GpuSeconds(const std::vector<TraceJob>& jobs) {
  double sum = 0;
  for (const TraceJob& job : jobs) {
    sum += static_cast<double>(job.nodes) * std::max(job.gpus_per_node, 1) *
           static_cast<double>(std::min(job.runtime, job.time_limit).count());
  }
  return sum;
}

}  // namespace

absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options) {
  if (options.cluster_nodes < 1 || options.gpus_per_node < 0 || options.duration.count() < 1 ||
      options.segment < 0 || options.users < 1) {
    return absl::InvalidArgumentError(
        "trace generator: nodes, duration and users must be positive and GPUs per node 0 or "
        "more; pass --cluster-nodes, --days (or --hours), --users, --gpus-per-node, and a "
        "--segment of 0 or more");
  }
  if (!(options.load > 0 && options.load <= 10)) {
    return absl::InvalidArgumentError(fmt::format(
        "trace generator: load {} is outside (0, 10]; pass --load 0.85 for a busy cluster",
        options.load));
  }
  const double shares[] = {options.pretrain_share, options.finetune_share, options.sweep_share};
  const double total_share = shares[0] + shares[1] + shares[2];
  if (std::any_of(std::begin(shares), std::end(shares), [](double s) { return s < 0; }) ||
      !(total_share > 0)) {
    return absl::InvalidArgumentError(
        "trace generator: the shares of pre-training, fine-tuning and sweeps must be 0 or more "
        "with a positive sum");
  }
  const double capacity = static_cast<double>(options.cluster_nodes) *
                          std::max(options.gpus_per_node, 1) *
                          static_cast<double>(options.duration.count());
  std::vector<TraceJob> jobs;
  const Kind kinds[] = {Kind::kPretrain, Kind::kFinetune, Kind::kSweep};
  for (int k = 0; k < 3; ++k) {
    if (shares[k] == 0) continue;
    // Mean GPU-seconds per arrival, from a sample with its own stream.
    Drawer sampler(options, options.seed * 7919 + static_cast<std::uint64_t>(k) + 1);
    std::vector<TraceJob> sample;
    for (int i = 0; i < kMeanSamples / (kinds[k] == Kind::kSweep ? 100 : 1); ++i) {
      sampler.Arrival(kinds[k], 0, sample);
    }
    const double per_arrival =
        GpuSeconds(sample) / (kMeanSamples / (kinds[k] == Kind::kSweep ? 100.0 : 1.0));
    const double rate = options.load * shares[k] / total_share * capacity /
                        static_cast<double>(options.duration.count()) / per_arrival;
    Drawer drawer(options, options.seed * 104729 + static_cast<std::uint64_t>(k));
    for (double t = drawer.Exponential(rate); t < static_cast<double>(options.duration.count());
         t += drawer.Exponential(rate)) {
      drawer.Arrival(kinds[k], static_cast<std::int64_t>(t), jobs);
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit_time < b.submit_time;
  });
  return jobs;
}

}  // namespace cohort::sim
