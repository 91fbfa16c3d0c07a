// SPDX-License-Identifier: Apache-2.0
#include "controller_server.h"

#include <sys/stat.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <boost/asio/signal_set.hpp>

#include "agents/agent_gateway.h"
#include "cluster_files.h"
#include "cohort/config/controller_addrs.h"
#include "controller.h"
#include "http/web_service.h"
#include "http_server.h"
#include "log_file.h"
#include "rpc/client_service.h"
#include "rpc/local_socket.h"
#include "rpc/rpc_limits.h"
#include "rpc/tcp_listener.h"
#include "standby.h"
#include "store/pg_conn.h"
#include "store/pg_leader.h"
#include "store/pg_store.h"
#include "store/store.h"
#include "tls_files.h"
#include "tls_session.h"

namespace cohort::controller {
namespace {

StateSync SyncOf(const std::string& name) {
  if (name == "normal") return StateSync::kNormal;
  if (name == "off") return StateSync::kOff;
  return StateSync::kFull;
}

// --check-state: what the database holds and whether it is sound.
int CheckState(const cohort::config::ClusterConfig& config, const std::string& path) {
  const bool postgres = config.state_backend == "postgresql";
  std::error_code error;
  if (!postgres && !std::filesystem::exists(path, error)) {
    std::cerr << fmt::format(
        "cohort-controller: no state database at {}; a new one is created at "
        "the first start\n",
        path);
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      postgres ? cohort::controller::OpenPostgresStore(config.state_database, Store::Mode::kRead,
                                                       StateSync::kFull, 0)
               : Store::Open(path, Store::Mode::kRead, StateSync::kFull);
  absl::StatusOr<cohort::controller::StateReport> report =
      store.ok() ? (*store)->Check()
                 : absl::StatusOr<cohort::controller::StateReport>(store.status());
  if (!report.ok()) {
    std::cerr << "cohort-controller: " << report.status().message() << '\n';
    return 1;
  }
  std::cout << fmt::format(
      "{}: ok\n  schema version {}\n  jobs {} ({} not finished)\n  next job id {}\n  node "
      "settings {}\n",
      postgres
          ? fmt::format("postgresql {}", cohort::controller::pg::Describe(config.state_database))
          : path,
      report->schema, report->jobs, report->active_jobs, report->next_job_id, report->nodes);
  return 0;
}

using Flags = ServerFlags;

// The controller's options from the configuration; nullopt (said on
// stderr) when StateDir cannot be made or the token key is unfit.
std::optional<Controller::Options> OptionsOf(const cohort::config::ClusterConfig& config,
                                             const std::string& state_path) {
  std::error_code error;
  // Made 0711: users reach the local socket in it, and list nothing.
  if (std::filesystem::create_directories(config.state_dir, error) && !error) {
    ::chmod(config.state_dir.c_str(), 0711);
  }
  if (error) {
    std::cerr << fmt::format("cohort-controller: cannot create StateDir {}: {}\n", config.state_dir,
                             error.message());
    return std::nullopt;
  }
  // Whoever may write StateDir may replace the database or the socket.
  struct stat dir {};
  if (::stat(config.state_dir.c_str(), &dir) == 0 && (dir.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::cerr << fmt::format(
        "cohort-controller: not starting: StateDir {} may be written by other users (mode {:04o}); "
        "run chmod go-w {} (0711 lets users reach the socket in it)\n",
        config.state_dir, dir.st_mode & 07777, config.state_dir);
    return std::nullopt;
  }
  Controller::Options options;
  const std::string token_key =
      config.token_key_file.empty()
          ? (std::filesystem::path(config.state_dir) / "token.key").string()
          : config.token_key_file;
  absl::StatusOr<cohort::controller::TokenSigner> tokens =
      cohort::controller::TokenSigner::FromKeyFile(token_key);
  if (!tokens.ok()) {
    std::cerr << "cohort-controller: not starting: " << tokens.status().message() << '\n';
    return std::nullopt;
  }
  options.tokens = *std::move(tokens);
  if (!config.job_submit_script.empty()) {
    absl::StatusOr<std::unique_ptr<cohort::policy::JobSubmitPolicy>> policy =
        cohort::policy::JobSubmitPolicy::Load(config.job_submit_script,
                                              [](int level, std::string_view line) {
                                                spdlog::log(level >= 3   ? spdlog::level::err
                                                            : level == 2 ? spdlog::level::info
                                                                         : spdlog::level::debug,
                                                            "job_submit_lua {}", line);
                                              });
    if (!policy.ok()) {
      std::cerr << "cohort-controller: not starting: the submit policy: "
                << policy.status().message() << '\n';
      return std::nullopt;
    }
    options.job_submit = *std::move(policy);
  }
  options.state_path = state_path;
  options.sync = SyncOf(config.state_sync);
  options.history_retention = std::chrono::hours(24 * config.history_days);
  // Agents say they are alive ten times per NodeTimeout, at least every
  // 30 s and at most every second: with the default NodeTimeout (300 s) a
  // 16,384-node cluster sends 546 heartbeats a second, not 16,384.
  options.heartbeat_interval = std::clamp<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config.node_timeout) / 10,
      std::chrono::seconds(1), std::chrono::seconds(30));
  return options;
}

// The state database's connections and what it holds.
struct OpenedState {
  Controller::Stores stores;
  cohort::controller::LoadedState loaded;
  std::chrono::milliseconds read_took{0};
};

absl::StatusOr<OpenedState> OpenState(const cohort::config::ClusterConfig& config,
                                      const std::string& path, StateSync sync, std::int64_t epoch) {
  const auto started = std::chrono::steady_clock::now();
  const bool postgres = config.state_backend == "postgresql";
  const auto open = [&](Store::Mode mode, std::int64_t fence) {
    return postgres
               ? cohort::controller::OpenPostgresStore(config.state_database, mode, sync, fence)
               : Store::Open(path, mode, sync);
  };
  absl::StatusOr<std::unique_ptr<Store>> writer = open(Store::Mode::kWrite, epoch);
  absl::StatusOr<cohort::controller::LoadedState> state =
      writer.ok() ? (*writer)->Load()
                  : absl::StatusOr<cohort::controller::LoadedState>(writer.status());
  const auto read_done = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Store>> reader = open(Store::Mode::kRead, 0);
  absl::StatusOr<std::unique_ptr<Store>> history = open(Store::Mode::kRead, 0);
  // PostgreSQL keeps no write-ahead log of the controller's to copy.
  absl::StatusOr<std::unique_ptr<Store>> checkpointer =
      postgres ? absl::StatusOr<std::unique_ptr<Store>>(nullptr) : open(Store::Mode::kWrite, 0);
  for (const absl::Status& s :
       {state.status(), reader.status(), history.status(), checkpointer.status()}) {
    if (!s.ok()) return s;
  }
  OpenedState opened;
  opened.stores.writer = *std::move(writer);
  opened.stores.reader = *std::move(reader);
  opened.stores.history = *std::move(history);
  opened.stores.checkpointer = *std::move(checkpointer);
  opened.loaded = *std::move(state);
  opened.read_took = std::chrono::duration_cast<std::chrono::milliseconds>(read_done - started);
  return opened;
}

// Where this controller listens when ControllerAddr lists several: the
// entry that names this host (short or full name), else the first.
void ChooseListenAddress(cohort::config::ClusterConfig& config) {
  if (config.controller_addrs.size() < 2) return;
  std::array<char, 256> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return;
  const std::string full(buffer.data());
  const std::string short_name = full.substr(0, full.find('.'));
  for (const std::string& target : cohort::config::ControllerTargets(config)) {
    const std::string host(cohort::config::HostOf(target));
    if (host != full && host != short_name) continue;
    config.controller_addr = host;
    config.controller_port = std::stoi(target.substr(target.rfind(':') + 1));
    return;
  }
}

// The address clients are sent to while this controller is active.
std::string AdvertisedAddress(const cohort::config::ClusterConfig& config, int port) {
  std::string host = config.controller_addr;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    std::array<char, 256> buffer{};
    if (::gethostname(buffer.data(), buffer.size() - 1) == 0) host = buffer.data();
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return fmt::format("{}:{}", host, port);
}

// The TCP port's PEM files, checked first (cohort config check says the
// same): the controller's certificate and key, and the cluster's CA (empty
// without TLSCAFile), with which a client may show a certificate it signed
// (an agent's, naming its nodes); one that shows none (a user's command)
// proves itself by MUNGE as over plain TCP.
struct TcpPems {
  std::string cert;
  std::string key;
  std::string ca;
};
absl::StatusOr<TcpPems> ReadTcpPems(const cohort::config::ClusterConfig& config) {
  const cohort::shell::TlsReport report = cohort::shell::CheckTlsFiles(config);
  if (!report.errors.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}", fmt::join(report.errors, "; ")));
  }
  absl::StatusOr<std::string> cert = cohort::shell::ReadPem(config.tls_cert_file, "TLSCertFile");
  absl::StatusOr<std::string> key = cohort::shell::ReadPem(config.tls_key_file, "TLSKeyFile");
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  TcpPems pems{.cert = *std::move(cert), .key = *std::move(key), .ca = {}};
  if (!config.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = cohort::shell::ReadPem(config.tls_ca_file, "TLSCAFile");
    if (!ca.ok()) return ca.status();
    pems.ca = *std::move(ca);
  }
  spdlog::info("tls_on {}", report.summary);
  return pems;
}

// A standby's TCP port's credentials (gRPC's own TLS): the files of
// ReadTcpPems when TLSCertFile is set.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const cohort::config::ClusterConfig& config) {
  if (!config.TlsOn()) return grpc::InsecureServerCredentials();
  absl::StatusOr<TcpPems> pems = ReadTcpPems(config);
  if (!pems.ok()) return pems.status();
  grpc::SslServerCredentialsOptions options(pems->ca.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = std::move(pems->ca);
  options.pem_key_cert_pairs.push_back({std::move(pems->key), std::move(pems->cert)});
  return grpc::SslServerCredentials(options);
}

// The active controller's TCP port's TLS, ended by the HTTP/2 guard; null
// for plain TCP.
absl::StatusOr<std::shared_ptr<cohort::tls::TlsServerContext>> TcpTls(
    const cohort::config::ClusterConfig& config) {
  if (!config.TlsOn()) return nullptr;
  absl::StatusOr<TcpPems> pems = ReadTcpPems(config);
  if (!pems.ok()) return pems.status();
  return cohort::tls::TlsServerContext::Make(pems->cert, pems->key, pems->ca);
}

// The HTTP port's TLS: the controller's certificate and key when
// TLSCertFile is set (TcpTls checked them first).
absl::StatusOr<std::optional<cohort::http::HttpTls>> HttpTlsOf(
    const cohort::config::ClusterConfig& config) {
  if (!config.TlsOn()) return std::nullopt;
  absl::StatusOr<std::string> cert = cohort::shell::ReadPem(config.tls_cert_file, "TLSCertFile");
  absl::StatusOr<std::string> key = cohort::shell::ReadPem(config.tls_key_file, "TLSKeyFile");
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  return cohort::http::HttpTls{*std::move(cert), *std::move(key)};
}

// --state-dir, which wins over the config's StateDir; none when not given.
std::optional<std::string> StateDirFlag(const Flags& flags) {
  if (flags.state_dir.empty()) return std::nullopt;
  return flags.state_dir;
}

// A reload of cohort.conf (SIGHUP, `cohort reconfigure`): the files are
// reread and checked against the jobs held now; when they are valid the
// controller stops in order and executes itself again in place, on the
// ports it listens on (as slurmctld's reconfigure does since Slurm 23.11):
// the state comes back from the database, agents reconnect and keep their
// ranks running, and every setting is taken afresh. Otherwise nothing
// changes and every error is said. State thread.
struct Reload {
  std::string config_path;
  bool restart = false;  ///< valid files were read: execute again once Serve returns
  int port = 0;          ///< what the new process listens on
  int http_port = -1;
};

absl::StatusOr<std::string> Reconfigure(Controller& controller, Reload& reload,
                                        const Flags& flags) {
  cohort::controller::ReopenLogFile();
  cohort::shell::LoadedCluster next =
      cohort::shell::LoadCluster({reload.config_path, std::nullopt, StateDirFlag(flags)});
  std::vector<std::string> errors;
  for (const cohort::Diagnostic& d : next.diagnostics.All()) {
    if (d.severity == cohort::Severity::kError) {
      errors.push_back(cohort::FormatDiagnostic(d));
    }
  }
  if (errors.empty()) {
    if (!flags.state_dir.empty()) next.config.state_dir = flags.state_dir;
    errors = controller.CheckReload(next.config, next.topology);
  }
  // The submit policy is read again too: a script that no longer loads
  // keeps the old configuration, and its policy, in force.
  if (errors.empty() && !next.config.job_submit_script.empty()) {
    if (absl::StatusOr<std::unique_ptr<cohort::policy::JobSubmitPolicy>> policy =
            cohort::policy::JobSubmitPolicy::Load(next.config.job_submit_script);
        !policy.ok()) {
      errors.push_back(
          fmt::format("the submit policy: {}", std::string(policy.status().message())));
    }
  }
  if (!errors.empty()) {
    spdlog::warn("reconfigure_refused config={} errors={}", reload.config_path, errors.size());
    for (const std::string& error : errors) spdlog::warn("reconfigure_error {}", error);
    return absl::InvalidArgumentError(
        fmt::format("{} not applied; the controller keeps running as it was. Fix:\n{}",
                    reload.config_path, fmt::join(errors, "\n")));
  }
  reload.restart = true;
  spdlog::info("reconfigure_applying config={} nodes={} partitions={}", reload.config_path,
               next.config.nodes.size(), next.config.partitions.size());
  // The caller's answer goes out first; then the controller stops in order.
  auto timer =
      std::make_shared<boost::asio::steady_timer>(controller.io(), std::chrono::milliseconds(200));
  timer->async_wait(
      [timer, &controller](const boost::system::error_code&) { controller.io().stop(); });
  return fmt::format(
      "{} is valid ({} nodes, {} partitions); the controller restarts in place on the same "
      "ports to apply it; jobs keep running",
      reload.config_path, next.config.nodes.size(), next.config.partitions.size());
}

// Serves clients (TCP and the local socket) and agents until SIGINT or
// SIGTERM, or until a commit fails; then stops in order.
int Serve(Controller& controller, const cohort::config::ClusterConfig& config,
          const cohort::controller::Authenticator& authenticator, const Flags& flags,
          const std::optional<cohort::controller::TokenSigner>& tokens, Reload& reload,
          const std::atomic<bool>& lease_lost, const std::atomic<bool>& stop_requested,
          std::atomic<int>& serving_port) {
  cohort::controller::LocalSocket local;
  const std::string socket_path =
      (std::filesystem::path(config.state_dir) / "cohort.sock").string();
  if (absl::Status s = local.Listen(socket_path); !s.ok()) {
    std::cerr << "cohort-controller: " << s.message() << '\n';
    return 1;
  }
  cohort::controller::PeerBook peers;
  cohort::controller::ClientService clients(controller, peers, authenticator);
  cohort::controller::AgentGatewayService agents(controller, authenticator, peers);

  grpc::ServerBuilder builder;
  const std::string address = fmt::format("{}:{}", config.controller_addr, config.controller_port);
  absl::StatusOr<std::shared_ptr<cohort::tls::TlsServerContext>> tls = TcpTls(config);
  if (!tls.ok()) {
    std::cerr << "cohort-controller: not starting: " << tls.status().message() << '\n';
    return 1;
  }
  absl::StatusOr<std::unique_ptr<cohort::controller::TcpListener>> tcp =
      cohort::controller::TcpListener::Listen(config.controller_addr, config.controller_port);
  if (!tcp.ok()) {
    std::cerr << fmt::format(
        "cohort-controller: {}; is another controller running? (set ControllerPort, or --port 0 "
        "for any free port)\n",
        std::string(tcp.status().message()));
    return 1;
  }
  const int bound_port = (*tcp)->Port();
  cohort::controller::LimitRpcServer(builder);
  builder.RegisterService(&clients);
  builder.RegisterService(&agents);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::cerr << fmt::format("cohort-controller: cannot start the gRPC server on {}\n", address);
    return 1;
  }
  // Destroyed when Serve returns, after the state thread's last handlers
  // ran: a scrape they answer still finds the HTTP thread's queue.
  cohort::controller::WebService web(controller, authenticator, tokens);
  // Every connection reaches gRPC through the guard.
  cohort::controller::H2Guard guard(server.get(), peers, *std::move(tls));
  (*tcp)->Serve(guard);
  local.Serve(guard);
  // Read at each scrape; `http` is set below, before the state thread runs.
  std::unique_ptr<cohort::http::HttpServer> http;
  controller.CountListeners([&] {
    const cohort::http::HttpServer::Counts web_counts =
        http ? http->Counted() : cohort::http::HttpServer::Counts{};
    return Controller::ListenerCounts{.rpc_refused = guard.Refused(),
                                      .rpc_shed = (*tcp)->Shed() + local.Shed(),
                                      .http_refused = web_counts.refused,
                                      .http_shed = web_counts.shed};
  });
  if (!flags.port_file.empty()) {
    std::ofstream(flags.port_file) << bound_port << '\n';
  }
  if (config.http_port >= 0) {
    absl::StatusOr<std::optional<cohort::http::HttpTls>> http_tls = HttpTlsOf(config);
    absl::StatusOr<std::unique_ptr<cohort::http::HttpServer>> listening =
        http_tls.ok() ? cohort::http::HttpServer::Listen(
                            config.controller_addr, config.http_port,
                            [&web](cohort::http::HttpRequest request,
                                   std::function<void(cohort::http::HttpAnswer)> answer) {
                              web.Serve(std::move(request), std::move(answer));
                            },
                            *http_tls)
                      : http_tls.status();
    if (!listening.ok()) {
      std::cerr << "cohort-controller: not starting: " << listening.status().message() << '\n';
      return 1;
    }
    http = *std::move(listening);
    if (!flags.http_port_file.empty()) {
      std::ofstream(flags.http_port_file) << http->Port() << '\n';
    }
    spdlog::info("http_started listen={}://{}:{} paths=/,/metrics,/api/v1/",
                 config.TlsOn() ? "https" : "http", config.controller_addr, http->Port());
  }
  spdlog::info("controller_started cluster={} listen={}:{} socket={} nodes={} auth={}",
               config.cluster_name, config.controller_addr, bound_port, socket_path,
               config.nodes.size(), cohort::config::AuthTypeName(authenticator.Type()));

  reload.port = bound_port;
  serving_port = bound_port;
  reload.http_port = http ? http->Port() : -1;
  // SIGINT and SIGTERM stop; SIGHUP rereads the configuration (and reopens
  // LogFile); SIGUSR2 reopens LogFile alone, for logrotate.
  boost::asio::signal_set signals(controller.io(), SIGINT, SIGTERM);
  signals.add(SIGHUP);
  signals.add(SIGUSR2);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& error, int signal) {
        if (error) return;
        if (signal == SIGUSR2) {
          cohort::controller::ReopenLogFile();
          spdlog::info("log_reopened");
        } else if (signal == SIGHUP) {
          spdlog::info("reconfigure_requested signal=SIGHUP");
          (void)Reconfigure(controller, reload, flags);
        } else {
          spdlog::info("controller_stopping signal={}", signal);
          controller.io().stop();
          return;
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  // A lost lease (StateBackend=postgresql) stops the controller at once:
  // another one is active, or soon will be; so does ControllerServer::Stop.
  boost::asio::steady_timer lease_check(controller.io());
  std::function<void()> check_lease = [&] {
    if (stop_requested) {
      spdlog::info("controller_stopping signal=none");
      controller.io().stop();
      return;
    }
    if (lease_lost) {
      controller.io().stop();
      return;
    }
    lease_check.expires_after(std::chrono::milliseconds(100));
    lease_check.async_wait([&](const boost::system::error_code& error) {
      if (!error) check_lease();
    });
  };
  check_lease();
  controller.Start();
  controller.io().run();

  if (controller.Failed() || lease_lost) {
    // The replies that waited on a commit which failed (or which a
    // controller that lost its lease must not make) were dropped: gRPC's
    // orderly shutdown would wait on their calls for ever. Nothing more may
    // be written; Run leaves at once, executing this program again as a
    // standby, or exiting.
    (*tcp)->Stop();
    local.Stop();
    guard.Stop();
    controller.CountListeners(nullptr);
    (void)server.release();
    (void)http.release();
    return 1;
  }
  (*tcp)->Stop();
  local.Stop();
  guard.Stop();
  controller.CountListeners(nullptr);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  // Streams ended by the shutdown posted their clean-up to the state thread;
  // run it so that nothing is left behind (scrapes answered into a stopped
  // HTTP server among it).
  if (http) http->Stop();
  controller.io().restart();
  controller.io().poll();
  controller.Shutdown();
  spdlog::info("controller_stopped");
  return controller.Failed() ? 1 : 0;
}

}  // namespace

ControllerServer::ControllerServer(ServerFlags flags, LeaveNow leave_now)
    : flags_(std::move(flags)), leave_now_(std::move(leave_now)) {}

ServerExit ControllerServer::Run() {
  const Flags& flags = flags_;
  // What ends the run: a status, or the program executed again.
  const auto exit_with = [](int status) {
    ServerExit end;
    end.status = status;
    return end;
  };
  const auto again = [](const Reload& reload, std::string_view why) {
    return ServerExit{.status = 0,
                      .again_because = std::string(why),
                      .port = reload.port,
                      .http_port = reload.http_port};
  };

  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_default_logger(spdlog::default_logger()->clone("controller"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");

  cohort::shell::LoadedCluster loaded =
      cohort::shell::LoadCluster({flags.config_path, std::nullopt, StateDirFlag(flags)});
  if (!cohort::shell::ReportDiagnostics(loaded)) {
    std::cerr << "cohort-controller: not starting; fix the configuration and check it with: cohort "
                 "config check -c "
              << flags.config_path << '\n';
    return exit_with(1);
  }
  cohort::config::ClusterConfig config = loaded.config;
  if (!flags.state_dir.empty()) config.state_dir = flags.state_dir;
  if (flags.listen.empty()) ChooseListenAddress(config);
  if (!flags.listen.empty()) config.controller_addr = flags.listen;
  if (flags.port >= 0) config.controller_port = flags.port;
  if (flags.http_port >= 0) config.http_port = flags.http_port;
  const std::string state_path = (std::filesystem::path(config.state_dir) / "state.db").string();
  if (flags.check_state) return exit_with(CheckState(config, state_path));

  if (!config.log_file.empty()) {
    if (absl::Status logging = cohort::controller::LogToFile(config.log_file); !logging.ok()) {
      std::cerr << "cohort-controller: not starting: " << logging.message() << '\n';
      return exit_with(1);
    }
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  }
  std::optional<Controller::Options> options = OptionsOf(config, state_path);
  if (!options) return exit_with(1);
  Reload reload{.config_path = flags.config_path, .restart = false, .port = 0, .http_port = -1};
  Controller* running = nullptr;  // the hook runs once the controller is made
  options->reconfigure = [&running, &reload, &flags]() -> absl::StatusOr<std::string> {
    return Reconfigure(*running, reload, flags);
  };
  absl::StatusOr<cohort::controller::Authenticator> authenticator =
      cohort::controller::Authenticator::Make(config);
  if (!authenticator.ok()) {
    std::cerr << "cohort-controller: not starting: " << authenticator.status().message() << '\n';
    return exit_with(1);
  }
  // With PostgreSQL, one controller of the cluster is active: this one
  // waits as a standby until it holds the lease. The flag is declared
  // first: the leadership's thread may set it until it is joined.
  std::atomic<bool> lease_lost{false};
  std::unique_ptr<cohort::controller::Leadership> leadership;
  if (config.state_backend == "postgresql") {
    // The schema first (the lease is a row of it): created or migrated
    // now, a newer one refused before this controller waits on it.
    // With --wait-for-database, a database that does not answer is waited
    // for, as a standby waits for the lease; any other error still ends it.
    absl::StatusOr<std::unique_ptr<Store>> schema = cohort::controller::OpenPostgresStore(
        config.state_database, Store::Mode::kWrite, options->sync, 0);
    for (int tries = 1; !schema.ok() && flags.wait_for_database &&
                        absl::IsUnavailable(schema.status()) && !stop_requested_;
         ++tries) {
      if (tries % 15 == 1) {
        spdlog::warn("state_database_unreachable tries={} reason={:?}; trying every 2 s", tries,
                     std::string(schema.status().message()));
      }
      std::this_thread::sleep_for(std::chrono::seconds(2));
      schema = cohort::controller::OpenPostgresStore(config.state_database, Store::Mode::kWrite,
                                                     options->sync, 0);
    }
    if (!schema.ok()) {
      std::cerr << "cohort-controller: not starting: " << schema.status().message() << '\n';
      return exit_with(1);
    }
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = TcpCredentials(config);
    if (!credentials.ok()) {
      std::cerr << "cohort-controller: not starting: " << credentials.status().message() << '\n';
      return exit_with(1);
    }
    std::array<char, 256> host{};
    (void)::gethostname(host.data(), host.size() - 1);
    leadership =
        std::make_unique<cohort::controller::Leadership>(cohort::controller::Leadership::Options{
            .conninfo = config.state_database,
            .holder = fmt::format("{} pid {}", host.data(), ::getpid()),
            .address = "",
            .timeout = config.controller_timeout});
    const auto waiting_since = std::chrono::steady_clock::now();
    absl::StatusOr<cohort::controller::StandbyEnd> end = cohort::controller::RunStandby(
        {.address = fmt::format("{}:{}", config.controller_addr, config.controller_port),
         .socket_path = (std::filesystem::path(config.state_dir) / "cohort.sock").string(),
         .port_file = flags.port_file,
         .credentials = *std::move(credentials),
         .advertise = [&config](int port) { return AdvertisedAddress(config, port); }},
        *leadership);
    if (!end.ok()) {
      std::cerr << "cohort-controller: not starting: " << end.status().message() << '\n';
      return exit_with(1);
    }
    using Why = cohort::controller::StandbyEnd::Why;
    if (end->why == Why::kStopped) {
      spdlog::info("controller_stopped standby=true");
      return exit_with(0);
    }
    reload.port = end->port;
    if (end->why == Why::kReload) return again(reload, "reconfigure");
    leadership->Keep([&lease_lost](const std::string& /*why*/) { lease_lost = true; });
    config.controller_port = end->port;
    spdlog::info("leadership_acquired epoch={} address={} waited_ms={}", leadership->Epoch(),
                 AdvertisedAddress(config, end->port),
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - waiting_since)
                     .count());
  }
  // The state comes first: a controller that cannot keep its promises does
  // not start.
  const auto load_started = std::chrono::steady_clock::now();
  absl::StatusOr<OpenedState> state =
      OpenState(config, state_path, options->sync, leadership ? leadership->Epoch() : 0);
  if (!state.ok()) {
    std::cerr << "cohort-controller: not starting: " << state.status().message() << '\n';
    if (leadership != nullptr) leadership->Release();
    return exit_with(1);
  }
  auto topology = std::make_unique<cohort::topology::Topology>(std::move(loaded.topology));
  Controller controller(config, std::move(topology), std::move(*loaded.pool), *options,
                        std::move(state->stores), std::move(state->loaded));
  running = &controller;
  spdlog::info("state_ready path={} sync={} read_ms={} took_ms={}",
               leadership ? fmt::format("postgresql:{}",
                                        cohort::controller::pg::Describe(config.state_database))
                          : state_path,
               config.state_sync, state->read_took.count(),
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - load_started)
                   .count());
  const int status = Serve(controller, config, *authenticator, flags, options->tokens, reload,
                           lease_lost, stop_requested_, serving_port_);
  if (leadership != nullptr && (lease_lost || controller.Fenced())) {
    // Another controller is active: this one waits as its standby.
    // Its servers were left running (Serve), so this frame never unwinds.
    spdlog::warn("controller_demoted epoch={}; waiting as a standby", leadership->Epoch());
    ServerExit demoted = again(reload, "lease lost");
    demoted.wait_for_database = true;
    leave_now_(demoted);
    std::_Exit(1);
  }
  if (controller.Failed()) {
    // Its servers were left running (Serve): the process ends at once.
    spdlog::critical("controller_stopped failed=true");
    leave_now_(exit_with(1));
    std::_Exit(1);
  }
  if (leadership != nullptr) leadership->Release();
  if (status != 0 || !reload.restart) return exit_with(status);
  // Everything is committed and every port closed: the same process runs
  // the controller again with the new files.
  controller.Shutdown();
  return again(reload, "reconfigure");
}

void ControllerServer::Stop() { stop_requested_ = true; }

}  // namespace cohort::controller
