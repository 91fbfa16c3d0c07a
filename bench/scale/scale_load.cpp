// SPDX-License-Identifier: Apache-2.0
// scale_load: submits jobs of mixed sizes (1 to 256 nodes) to a controller
// from N concurrent clients, each on its own connection, with synchronous
// SubmitJob calls, for bench/scale/run.sh. Each job's fake runtime
// (COHORT_FAKE_RUNTIME, read by a `cohort-agent --fake-exec`) is drawn
// uniformly from [MIN_S, MAX_S]. Prints one JSON line: jobs, failures,
// seconds, rate and latency percentiles in ms.
//
//   scale_load TARGET CLIENTS JOBS_PER_CLIENT MIN_S MAX_S SEED
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cohort/v1/cohort.grpc.pb.h"

namespace {

// Job sizes in nodes and their weights: many small jobs, a tail of gangs.
constexpr int kSizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr double kWeights[] = {40, 10, 12, 12, 10, 8, 5, 2, 1};

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const auto rank = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank),
                   values.end());
  return values[rank];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: scale_load TARGET CLIENTS JOBS_PER_CLIENT MIN_S MAX_S SEED\n");
    return 2;
  }
  const std::string target = argv[1];
  const int clients = std::max(1, std::atoi(argv[2]));
  const int per_client = std::max(1, std::atoi(argv[3]));
  const double min_s = std::atof(argv[4]);
  const double max_s = std::max(min_s, std::atof(argv[5]));
  const auto seed = static_cast<std::uint64_t>(std::atoll(argv[6]));
  std::atomic<int> failures{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments arguments;
      arguments.SetInt("grpc.use_local_subchannel_pool", 1);  // one connection per client
      auto channel =
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
      auto stub = cohort::v1::Controller::NewStub(channel);
      std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(c));
      std::discrete_distribution<int> size(std::begin(kWeights), std::end(kWeights));
      std::uniform_real_distribution<double> runtime(min_s, max_s);
      std::vector<double>& mine = latencies[static_cast<std::size_t>(c)];
      mine.reserve(static_cast<std::size_t>(per_client));
      for (int i = 0; i < per_client; ++i) {
        cohort::v1::SubmitJobRequest request;
        cohort::v1::JobSpec* spec = request.mutable_spec();
        const int nodes = kSizes[size(rng)];
        spec->set_name("scale");
        spec->set_nodes(nodes);
        spec->set_gpus_per_node(nodes == 1 ? 1 : 8);
        spec->add_argv("/opt/train");
        spec->set_work_dir("/tmp");
        spec->set_output("/dev/null");
        cohort::v1::EnvVar* var = spec->add_env();
        var->set_name("COHORT_FAKE_RUNTIME");
        var->set_value(std::to_string(runtime(rng)));
        grpc::ClientContext context;
        cohort::v1::SubmitJobResponse response;
        const auto t0 = std::chrono::steady_clock::now();
        const grpc::Status status = stub->SubmitJob(&context, request, &response);
        mine.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        if (!status.ok() || response.job_id() <= 0) {
          if (failures.fetch_add(1) == 0) {
            std::fprintf(stderr, "submit failed: %s\n", status.error_message().c_str());
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<double> all;
  for (const auto& mine : latencies) all.insert(all.end(), mine.begin(), mine.end());
  const double total = static_cast<double>(all.size());
  std::printf(
      "{\"jobs\": %zu, \"failures\": %d, \"seconds\": %.3f, \"rate\": %.1f, \"p50_ms\": %.3f, "
      "\"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
      all.size(), failures.load(), seconds, total / seconds, Percentile(all, 0.50),
      Percentile(all, 0.99), Percentile(all, 1.0));
  return failures.load() == 0 ? 0 : 1;
}
