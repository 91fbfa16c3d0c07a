// SPDX-License-Identifier: Apache-2.0
// cohort-controller: the cluster's controller service.
#include <sys/stat.h>

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

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"cohort-controller: the Cohort cluster's controller service", "cohort-controller"};
  std::string config_path = std::getenv("COHORT_CONF") != nullptr ? std::getenv("COHORT_CONF")
                                                                   : "/etc/cohort/cohort.conf";
  std::string listen;
  int port = -1;
  std::string state_dir;
  std::string port_file;
  std::string log_level = "info";
  app.add_option("-c,--config", config_path, "cohort.conf (default: $COHORT_CONF or /etc/cohort/cohort.conf)");
  app.add_option("--listen", listen, "TCP address to listen on (default: ControllerAddr)");
  app.add_option("--port", port, "TCP port (default: ControllerPort; 0 picks a free one)");
  app.add_option("--state-dir", state_dir, "state folder, home of the local socket (default: StateDir)");
  app.add_option("--port-file", port_file, "write the TCP port listened on to this file");
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error");
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
  auto topology = std::make_unique<cohort::topology::Topology>(std::move(loaded.topology));
  cohort::controller::Controller controller(config, std::move(topology), std::move(*loaded.pool),
                                            options);
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
  spdlog::info("controller_stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
