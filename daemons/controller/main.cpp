// SPDX-License-Identifier: Apache-2.0
// cohort-controller: the cluster's controller service.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "agent_gateway.h"
#include "client_service.h"
#include "cluster_files.h"
#include "controller.h"
#include "local_socket.h"
#include "store.h"

namespace {

using cohort::controller::StateSync;
using cohort::controller::Store;

StateSync SyncOf(const std::string& name) {
  if (name == "normal") return StateSync::kNormal;
  if (name == "off") return StateSync::kOff;
  return StateSync::kFull;
}

// --check-state: what the database holds and whether it is sound.
int CheckState(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::cerr << fmt::format("cohort-controller: no state database at {}; a new one is created at "
                             "the first start\n",
                             path);
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, Store::Mode::kRead, StateSync::kFull);
  absl::StatusOr<cohort::controller::StateReport> report =
      store.ok() ? (*store)->Check() : absl::StatusOr<cohort::controller::StateReport>(store.status());
  if (!report.ok()) {
    std::cerr << "cohort-controller: " << report.status().message() << '\n';
    return 1;
  }
  std::cout << fmt::format(
      "{}: ok\n  schema version {}\n  jobs {} ({} not finished)\n  next job id {}\n  node "
      "settings {}\n",
      path, report->schema, report->jobs, report->active_jobs, report->next_job_id, report->nodes);
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{"cohort-controller: the Cohort cluster's controller service", "cohort-controller"};
  std::string config_path = std::getenv("COHORT_CONF") != nullptr ? std::getenv("COHORT_CONF")
                                                                   : "/etc/cohort/cohort.conf";
  std::string listen;
  int port = -1;
  std::string state_dir;
  std::string port_file;
  std::string log_level = "info";
  bool check_state = false;
  app.add_option("-c,--config", config_path, "cohort.conf (default: $COHORT_CONF or /etc/cohort/cohort.conf)");
  app.add_option("--listen", listen, "TCP address to listen on (default: ControllerAddr)");
  app.add_option("--port", port, "TCP port (default: ControllerPort; 0 picks a free one)");
  app.add_option("--state-dir", state_dir, "state folder, home of the local socket (default: StateDir)");
  app.add_option("--port-file", port_file, "write the TCP port listened on to this file");
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error");
  app.add_flag("--check-state", check_state,
               "check the state database (StateDir/state.db) and summarise it, then exit");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_default_logger(spdlog::default_logger()->clone("controller"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");

  cohort::shell::LoadedCluster loaded = cohort::shell::LoadCluster({config_path, std::nullopt});
  if (!cohort::shell::ReportDiagnostics(loaded)) {
    std::cerr << "cohort-controller: not starting; fix the configuration and check it with: cohort "
                 "config check -c "
              << config_path << '\n';
    return 1;
  }
  cohort::config::ClusterConfig config = loaded.config;
  if (!state_dir.empty()) config.state_dir = state_dir;
  if (!listen.empty()) config.controller_addr = listen;
  if (port >= 0) config.controller_port = port;
  const std::string state_path = (std::filesystem::path(config.state_dir) / "state.db").string();
  if (check_state) return CheckState(state_path);

  absl::StatusOr<std::string> key = cohort::shell::ReadAuthKey(config.auth_key_file);
  if (!key.ok()) {
    std::cerr << fmt::format(
        "cohort-controller: cannot read the cluster key {}: {}\n  hint: create it with: head -c 32 "
        "/dev/urandom | base64 > {} && chmod 600 {}\n",
        config.auth_key_file, std::string(key.status().message()),
        config.auth_key_file, config.auth_key_file);
    return 1;
  }
  std::error_code error;
  std::filesystem::create_directories(config.state_dir, error);
  if (error) {
    std::cerr << fmt::format("cohort-controller: cannot create StateDir {}: {}\n", config.state_dir,
                             error.message());
    return 1;
  }

  cohort::controller::Controller::Options options;
  options.auth_key = *key;
  options.state_path = state_path;
  options.sync = SyncOf(config.state_sync);
  options.history_retention = std::chrono::hours(24 * config.history_days);
  // Agents say they are alive ten times per NodeTimeout, at least every
  // 30 s and at most every second: with the default NodeTimeout (300 s) a
  // 16,384-node cluster sends 546 heartbeats a second, not 16,384.
  options.heartbeat_interval = std::clamp<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config.node_timeout) / 10,
      std::chrono::seconds(1), std::chrono::seconds(30));
  // The state comes first: a controller that cannot keep its promises does
  // not start.
  const auto load_started = std::chrono::steady_clock::now();
  cohort::controller::Controller::Stores stores;
  absl::StatusOr<std::unique_ptr<Store>> writer = Store::Open(state_path, Store::Mode::kWrite, options.sync);
  absl::StatusOr<cohort::controller::LoadedState> state =
      writer.ok() ? (*writer)->Load() : absl::StatusOr<cohort::controller::LoadedState>(writer.status());
  const auto read_done = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(state_path, Store::Mode::kRead, options.sync);
  absl::StatusOr<std::unique_ptr<Store>> history = Store::Open(state_path, Store::Mode::kRead, options.sync);
  absl::StatusOr<std::unique_ptr<Store>> checkpointer =
      Store::Open(state_path, Store::Mode::kWrite, options.sync);
  for (const absl::Status& s :
       {state.status(), reader.status(), history.status(), checkpointer.status()}) {
    if (!s.ok()) {
      std::cerr << "cohort-controller: not starting: " << s.message() << '\n';
      return 1;
    }
  }
  stores.writer = *std::move(writer);
  stores.reader = *std::move(reader);
  stores.history = *std::move(history);
  stores.checkpointer = *std::move(checkpointer);
  auto topology = std::make_unique<cohort::topology::Topology>(std::move(loaded.topology));
  cohort::controller::Controller controller(config, std::move(topology), std::move(*loaded.pool),
                                            options, std::move(stores), *std::move(state));
  spdlog::info("state_ready path={} sync={} read_ms={} took_ms={}", state_path, config.state_sync,
               std::chrono::duration_cast<std::chrono::milliseconds>(read_done - load_started).count(),
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - load_started)
                   .count());
  cohort::controller::LocalSocket local;
  const std::string socket_path = (std::filesystem::path(config.state_dir) / "cohort.sock").string();
  if (absl::Status s = local.Listen(socket_path); !s.ok()) {
    std::cerr << "cohort-controller: " << s.message() << '\n';
    return 1;
  }
  cohort::controller::ClientService clients(controller, local, options.auth_key);
  cohort::controller::AgentGatewayService agents(controller);

  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address = fmt::format("{}:{}", config.controller_addr, config.controller_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&clients);
  builder.RegisterService(&agents);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << fmt::format(
        "cohort-controller: cannot listen on {}; is another controller running? (set "
        "ControllerPort, or --port 0 for any free port)\n",
        address);
    return 1;
  }
  local.Serve(server.get());
  if (!port_file.empty()) {
    std::ofstream(port_file) << bound_port << '\n';
  }
  spdlog::info("controller_started cluster={} listen={}:{} socket={} nodes={}", config.cluster_name,
               config.controller_addr, bound_port, socket_path, loaded.config.nodes.size());

  boost::asio::signal_set signals(controller.io(), SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int signal) {
    spdlog::info("controller_stopping signal={}", signal);
    controller.io().stop();
  });
  controller.Start();
  controller.io().run();

  local.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  // Streams ended by the shutdown posted their clean-up to the state thread;
  // run it so that nothing is left behind.
  controller.io().restart();
  controller.io().poll();
  controller.Shutdown();
  spdlog::info("controller_stopped");
  return controller.Failed() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
