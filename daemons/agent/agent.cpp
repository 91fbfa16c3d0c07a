// SPDX-License-Identifier: Apache-2.0
#include "agent.h"

#include <fstream>

#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <signal.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <utility>

#include "agent_log.h"
#include "cohort/text/hostlist.h"

namespace cohort::agent {
namespace {

// gRPC's own reconnect backoff must not outlast ours: while a channel backs
// off, calls on it fail at once, so a controller back up would stay
// unreachable for up to gRPC's default of two minutes.
constexpr int kChannelMinBackoffMs = 100;
constexpr int kChannelMaxBackoffMs = 5000;
// How long one connection attempt (TCP and the TLS handshake) may take.
// gRPC reads it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, which was the
// 100 ms above: a controller busy with many agents' handshakes (after a
// restart, or a takeover) made every attempt time out ("handshaker
// shutdown"), and the agents went round the controllers again and again.
// A refused connection still fails at once.
constexpr int kConnectTimeoutMs = 3000;
// A ping every 10 s while the stream is open, 5 s for its answer.
constexpr int kKeepaliveMs = 10'000;
constexpr int kKeepaliveTimeoutMs = 5'000;
// How long a graceful stop may wait for gRPC to finish the streams.
constexpr std::chrono::seconds kStopDeadline{10};
// How often every launch's events are read and adopted stepds checked.
constexpr std::chrono::seconds kPollInterval{1};
constexpr int kNoticeQueueBytes = 4 << 20;

// NVML for the samples of what launches use, where they are taken and the
// driver is there; the agent goes on without.
std::unique_ptr<GpuUsageReader> OpenGpuUsage(const AgentSettings& settings) {
  if (settings.fake_exec || settings.gather_interval.count() == 0) return nullptr;
  absl::StatusOr<std::unique_ptr<GpuUsageReader>> reader =
      GpuUsageReader::Open(nvml::LibraryPath());
  if (!reader.ok()) {
    AgentLog().log(absl::IsNotFound(reader.status()) ? spdlog::level::debug : spdlog::level::warn,
                   "gpu_usage_off reason={:?}", std::string(reader.status().message()));
    return nullptr;
  }
  return *std::move(reader);
}

std::string NodeNames(const std::vector<NodeSetup>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NodeSetup& node : nodes) names.push_back(node.name);
  return hostlist::Compress(names);
}

}  // namespace

Agent::Agent(boost::asio::io_context& loop, AgentSettings settings)
    : loop_(loop),
      settings_(std::move(settings)),
      gpu_usage_(OpenGpuUsage(settings_)),
      environment_{.auth_type = settings_.auth_type,
                   .munge_socket = settings_.munge_socket,
                   .auth_key = settings_.auth_key,
                   .fake_exec = settings_.fake_exec,
                   .health_program = settings_.health_program,
                   .health_interval = settings_.health_interval,
                   .stepd = {.cluster_name = settings_.cluster_name,
                             .apply_binding = settings_.mode == NodeMode::kReal,
                             .prolog = settings_.prolog,
                             .epilog = settings_.epilog,
                             .script_timeout = settings_.script_timeout,
                             .container_images = settings_.container_images,
                             .container_hooks_dir = settings_.container_hooks_dir,
                             .container_state_dir = settings_.spool_dir + "/containers",
                             .imex_channel_dir = settings_.imex_channel_dir,
                             .imex_dev_major = settings_.imex_dev_major,
                             .gather_interval = settings_.gather_interval,
                             .gpus = gpu_usage_.get()}},
      work_(boost::asio::make_work_guard(loop)),
      stop_signals_(loop, SIGINT, SIGTERM),
      stop_deadline_(loop),
      reaper_(loop),
      launcher_(settings_.spool_dir, StepdNextToAgent(), settings_.host_topology_xml),
      images_(loop, reaper_, settings_.container_images, step::ImageProgram(), settings_.spool_dir,
              ::geteuid() == 0),
      notices_(loop),
      poll_timer_(loop) {}

Agent::~Agent() {
  if (!http_) return;
  // Scrapes the loop took but did not answer run now, into a stopped
  // server: nothing answers them after it is gone.
  http_->Stop();
  loop_.restart();
  loop_.poll();
  http_.reset();
}

absl::Status Agent::Start() {
  if (absl::Status spool = launcher_.PrepareSpool(); !spool.ok()) return spool;
  // Fake launches keep nothing on disk: no folder per node.
  if (!settings_.fake_exec) {
    for (const NodeSetup& setup : settings_.nodes) {
      if (absl::Status folder = launcher_.PrepareNode(setup.name); !folder.ok()) return folder;
    }
  }
  for (const std::string& warning : settings_.warnings) AgentLog().warn("{}", warning);

  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kChannelMinBackoffMs);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectTimeoutMs);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kChannelMaxBackoffMs);
  // A controller whose machine vanished sends no reset: without pings the
  // stream would wait on it for TCP's retransmissions (a quarter of an
  // hour) before the agent tried the next controller.
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  // TLS to a controller that serves it (TLSCertFile), its certificate
  // verified with TLSCAFile; a Unix socket stays plain.
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (settings_.tls) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = settings_.tls_ca_pem;
    tls.pem_cert_chain = settings_.agent_cert_pem;
    tls.pem_private_key = settings_.agent_key_pem;
    credentials = grpc::SslCredentials(tls);
  }
  links_ = std::make_unique<ControllerLinks>(settings_.controller_targets, credentials, arguments);

  reaper_.Start();
  WaitForStopSignal();
  ListenForStepds();
  nodes_.reserve(settings_.nodes.size());
  for (const NodeSetup& setup : settings_.nodes) {
    nodes_.push_back(std::make_unique<AgentNode>(
        environment_, setup,
        AgentNodeParts(loop_, *links_, environment_, setup, reaper_, launcher_, images_)));
    nodes_by_name_.emplace(setup.name, nodes_.back().get());
  }
  AgentLog().info("agent_started nodes={} count={} mode={} controller={} spool={} pid={}",
                  NodeNames(settings_.nodes), settings_.nodes.size(),
                  settings_.fake_exec                     ? "emulated-fake-exec"
                  : settings_.mode == NodeMode::kEmulated ? "emulated"
                                                          : "real",
                  fmt::join(settings_.controller_targets, ","), settings_.spool_dir, ::getpid());
  for (const std::unique_ptr<AgentNode>& node : nodes_) node->Start();
  SchedulePoll();
  return ServeMetrics();
}

absl::Status Agent::ServeMetrics() {
  if (settings_.http_port < 0) return absl::OkStatus();
  // Each scrape is rendered on the loop, where the nodes live.
  absl::StatusOr<std::unique_ptr<http::HttpServer>> listening = http::HttpServer::Listen(
      settings_.http_address, settings_.http_port,
      [this](http::HttpRequest request, std::function<void(http::HttpAnswer)> answer) {
        if (request.method != "GET" || request.path != "/metrics") {
          answer({.status = 404,
                  .content_type = "text/plain; charset=utf-8",
                  .body = "the agent serves GET /metrics\n",
                  .cache_control = ""});
          return;
        }
        boost::asio::post(loop_, [this, answer = std::move(answer)] {
          std::vector<NodeMetrics> all;
          all.reserve(nodes_.size());
          for (const std::unique_ptr<AgentNode>& node : nodes_) all.push_back(node->Metrics());
          answer({.status = 200,
                  .content_type = "text/plain; version=0.0.4; charset=utf-8",
                  .body = RenderAgentMetrics(all),
                  .cache_control = "no-store"});
        });
      });
  if (!listening.ok()) return listening.status();
  http_ = *std::move(listening);
  if (!settings_.http_port_file.empty()) {
    std::ofstream(settings_.http_port_file) << http_->Port() << '\n';
  }
  AgentLog().info("http_started listen=http://{}:{} paths=/metrics", settings_.http_address,
                  http_->Port());
  return absl::OkStatus();
}

void Agent::ListenForStepds() {
  // A stale socket of an earlier agent would refuse the bind.
  const std::string path = launcher_.SocketPath();
  ::unlink(path.c_str());
  boost::system::error_code error;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    error = boost::asio::error::name_too_long;
  } else {
    notices_.open(boost::asio::local::datagram_protocol(), error);
    if (!error) notices_.bind(boost::asio::local::datagram_protocol::endpoint(path), error);
  }
  if (!error) {
    // Many launches ending at once must not overflow the queue (a lost
    // datagram costs up to a poll interval). The kernel caps it at rmem_max.
    const boost::asio::socket_base::receive_buffer_size size(kNoticeQueueBytes);
    boost::system::error_code ignored;
    notices_.set_option(size, ignored);
  }
  if (error) {
    // Launches still progress, each poll interval instead of at once.
    AgentLog().warn("stepd_socket_unavailable path={} error={:?} poll_ms={}", path, error.message(),
                    std::chrono::milliseconds(kPollInterval).count());
    notices_.close(error);
    return;
  }
  ReceiveNotice();
}

void Agent::ReceiveNotice() {
  auto on_received = [this](const boost::system::error_code& error, std::size_t size) {
    if (error == boost::asio::error::operation_aborted || stopping_) return;
    if (error) {
      AgentLog().warn("stepd_socket_failed error={:?}; polling only", error.message());
      return;
    }
    OnNotice(std::string_view(notice_buffer_.data(), size));
    ReceiveNotice();
  };
  notices_.async_receive(boost::asio::buffer(notice_buffer_), std::move(on_received));
}

void Agent::OnNotice(std::string_view folder) {
  // SPOOL/<node>/job-<id>.<attempt>, as the stepd was given it.
  const std::filesystem::path path(folder);
  const std::optional<step::LaunchId> id = step::ParseLaunchFolderName(path.filename().string());
  const auto node = nodes_by_name_.find(path.parent_path().filename().string());
  if (!id || node == nodes_by_name_.end()) {
    AgentLog().debug("stepd_notice_ignored folder={:?}", folder);
    return;
  }
  node->second->OnStepNotice(*id);
}

void Agent::SchedulePoll() {
  poll_timer_.expires_after(kPollInterval);
  poll_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || stopping_) return;
    for (const std::unique_ptr<AgentNode>& node : nodes_) node->Poll();
    SchedulePoll();
  });
}

void Agent::WaitForStopSignal() {
  stop_signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (stopping_) {
      // A second signal: the operator does not want to wait for gRPC.
      AgentLog().warn("agent_stop_forced signal={}", SignalName(signal));
      std::_Exit(EXIT_FAILURE);
    }
    AgentLog().info("agent_signal signal={}", SignalName(signal));
    Stop();
    WaitForStopSignal();
  });
}

void Agent::Stop() {
  if (stopping_) return;
  stopping_ = true;
  std::size_t ranks = 0;
  for (const std::unique_ptr<AgentNode>& node : nodes_) ranks += node->LiveRanks();
  AgentLog().info("agent_stopping ranks_left_running={}", ranks);
  images_.Stop();  // pulls ahead are tried again at the jobs' starts
  stop_deadline_.expires_after(kStopDeadline);
  stop_deadline_.async_wait([](const boost::system::error_code& error) {
    if (error) return;
    // gRPC still holds the streams, so nothing can be torn down safely; the
    // ranks are not ours to kill either way.
    AgentLog().error("agent_stop_timeout after_s={}", kStopDeadline.count());
    std::_Exit(EXIT_FAILURE);
  });
  nodes_running_ = nodes_.size();
  if (nodes_.empty()) {
    nodes_running_ = 1;
    OnNodeStopped();
    return;
  }
  for (const std::unique_ptr<AgentNode>& node : nodes_) {
    node->Stop([this] { OnNodeStopped(); });
  }
}

void Agent::OnNodeStopped() {
  if (--nodes_running_ > 0) return;
  // Nothing is left that needs the loop: let run() return.
  reaper_.Stop();
  boost::system::error_code ignored;
  stop_signals_.cancel(ignored);
  poll_timer_.cancel();
  notices_.close(ignored);
  stop_deadline_.cancel();
  work_.reset();
  AgentLog().info("agent_stopped");
}

absl::Status RunAgent(AgentSettings settings) {
  boost::asio::io_context loop(1);
  Agent agent(loop, std::move(settings));
  if (absl::Status started = agent.Start(); !started.ok()) return started;
  try {
    loop.run();
  } catch (const std::exception& e) {
    // A bug of ours; gRPC still holds the streams, so leave without cleanup.
    AgentLog().critical("agent_crashed error={:?}", e.what());
    std::_Exit(EXIT_FAILURE);
  }
  return absl::OkStatus();
}

}  // namespace cohort::agent
