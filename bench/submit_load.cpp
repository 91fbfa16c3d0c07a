// SPDX-License-Identifier: Apache-2.0
// submit_load: N concurrent clients, each on its own connection to the
// controller's Unix socket, submitting one-node jobs back to back with
// synchronous SubmitJob calls. Every answer with an id is a durable
// submission (the controller replies after the commit). Prints one JSON line.
//
//   submit_load unix:/path/cohort.sock CLIENTS JOBS_PER_CLIENT
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cohort/v1/cohort.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: submit_load unix:/path/cohort.sock CLIENTS JOBS_PER_CLIENT\n");
    return 2;
  }
  const std::string target = argv[1];
  const int clients = std::max(1, std::atoi(argv[2]));
  const int per_client = std::max(1, std::atoi(argv[3]));
  std::atomic<int> failures{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments arguments;
      arguments.SetInt("grpc.use_local_subchannel_pool", 1);  // one connection per client
      auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
      auto stub = cohort::v1::Controller::NewStub(channel);
      cohort::v1::SubmitJobRequest request;
      cohort::v1::JobSpec* spec = request.mutable_spec();
      spec->set_name("load");
      spec->set_nodes(1);
      spec->add_argv("true");
      spec->set_work_dir("/tmp");
      for (int i = 0; i < 40; ++i) {  // an environment of typical size
        cohort::v1::EnvVar* var = spec->add_env();
        var->set_name("VAR" + std::to_string(i));
        var->set_value(std::string(48, 'x'));
      }
      std::vector<double>& mine = latencies[static_cast<std::size_t>(c)];
      mine.reserve(static_cast<std::size_t>(per_client));
      for (int i = 0; i < per_client; ++i) {
        grpc::ClientContext context;
        cohort::v1::SubmitJobResponse response;
        const auto t0 = std::chrono::steady_clock::now();
        const grpc::Status status = stub->SubmitJob(&context, request, &response);
        mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
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
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) { return all[static_cast<std::size_t>(q * static_cast<double>(all.size() - 1))]; };
  const int total = clients * per_client;
  std::printf(
      "{\"clients\": %d, \"submissions\": %d, \"failures\": %d, \"seconds\": %.3f, "
      "\"per_second\": %.0f, \"latency_ms_p50\": %.2f, \"latency_ms_p99\": %.2f}\n",
      clients, total, failures.load(), seconds, total / seconds, at(0.5), at(0.99));
  return failures.load() == 0 ? 0 : 1;
}
