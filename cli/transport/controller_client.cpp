// SPDX-License-Identifier: Apache-2.0
#include "transport/controller_client.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "cluster_files.h"
#include "cohort/config/cluster_config.h"
#include "cohort/config/controller_addrs.h"
#include "cohort/fmt_absl.h"
#include "munge_credential.h"

namespace cohort::cli {
namespace {

constexpr std::string_view kDefaultConfig = "/etc/cohort/cohort.conf";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

bool IsUnix(std::string_view address) { return address.starts_with("unix:"); }

// The Controller service's methods, as the wire names them.
std::string Method(std::string_view name) { return fmt::format("/cohort.v1.Controller/{}", name); }

}  // namespace

void AddConnectionOptions(CLI::App& command, ConnectionOptions& options,
                          ConfigShortName short_name) {
  command
      .add_option("--controller", options.controller,
                  "the controller: HOST:PORT or unix:/PATH, or several separated by commas, "
                  "tried in order (default: $COHORT_CONTROLLER, else the Unix socket in the "
                  "config's StateDir, or ControllerAddr when it names several)")
      ->type_name("ADDR")
      ->group("Connection");
  command
      .add_option(short_name == ConfigShortName::kDashC ? "-c,--config" : "--config",
                  options.config,
                  "cohort.conf that names the controller's StateDir (default: $COHORT_CONF, else "
                  "/etc/cohort/cohort.conf)")
      ->type_name("FILE")
      ->group("Connection");
}

absl::StatusOr<ControllerAddress> ResolveControllerAddress(const ConnectionOptions& options) {
  ControllerAddress out;
  for (const auto& [value, source] : {std::pair{options.controller, "--controller"},
                                      std::pair{Env("COHORT_CONTROLLER"), "COHORT_CONTROLLER"}}) {
    if (value.empty()) continue;
    absl::StatusOr<std::vector<std::string>> targets =
        config::ParseControllerList(value, 0, source);
    if (!targets.ok()) return targets.status();
    out.targets = *std::move(targets);
    break;
  }
  const auto tcp = [](const std::string& target) { return !IsUnix(target); };
  if (!out.targets.empty() && std::none_of(out.targets.begin(), out.targets.end(), tcp)) {
    return out;
  }

  // The config names the socket, and how a TCP client proves who it is.
  std::string path = options.config;
  if (path.empty()) path = Env("COHORT_CONF");
  if (path.empty()) path = std::string(kDefaultConfig);
  absl::StatusOr<std::string> text = shell::ReadFile(path);
  if (!text.ok()) {
    // TCP needs the config only for AuthType and munged's socket: without
    // one named, libmunge's defaults.
    if (!out.targets.empty() && options.config.empty() && Env("COHORT_CONF").empty()) return out;
    return absl::InvalidArgumentError(
        fmt::format("no controller address: {}; pass --controller HOST:PORT or unix:/PATH, set "
                    "COHORT_CONTROLLER, or name cohort.conf with --config or COHORT_CONF",
                    text.status()));
  }
  // The CLI needs only StateDir, AuthType and AuthInfo; problems elsewhere
  // in the file are the daemons' to report (cohort config check shows them).
  const config::ClientSettings settings = config::ReadClientSettings(*text, path, shell::ReadFile);
  out.auth_type = settings.auth_type;
  out.munge_socket = settings.munge_socket;
  out.tls = GrpcChannel::Tls{settings.tls, settings.tls_ca_file};
  if (out.targets.empty() && settings.controllers.size() > 1) {
    // Several controllers (one active): the local socket may be a
    // standby's, or on no host of this one; the TCP addresses reach all.
    out.targets = settings.controllers;
  }
  if (out.targets.empty()) {
    // The controller's host has its socket; any other host (a login node,
    // the node where a batch script runs srun) dials ControllerAddr.
    const std::filesystem::path socket = std::filesystem::path(settings.state_dir) / "cohort.sock";
    std::error_code error;
    if (settings.controllers.empty() || std::filesystem::exists(socket, error)) {
      out.targets.push_back(fmt::format("unix:{}", socket.string()));
    } else {
      out.targets = settings.controllers;
    }
  }
  return out;
}

absl::StatusOr<ControllerClient> ControllerClient::Connect(const ConnectionOptions& options) {
  absl::StatusOr<ControllerAddress> address = ResolveControllerAddress(options);
  if (!address.ok()) return address.status();
  ControllerClient client(*std::move(address));
  for (const std::string& target : client.address_.targets) {
    std::unique_ptr<GrpcChannel> channel = client.OpenChannel(target);
    if (channel == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("controller address \"{}\": write HOST:PORT (such as 10.0.0.1:6820 or "
                      "ctl01:6820) or unix:/PATH (a path of at most 107 bytes)",
                      target));
    }
    client.channels_.push_back(std::move(channel));
  }
  return client;
}

ControllerClient::ControllerClient(ControllerAddress address) : address_(std::move(address)) {}

std::unique_ptr<GrpcChannel> ControllerClient::OpenChannel(std::string_view target) const {
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(target, address_.tls);
  // With a standby to ask, a controller whose host is cut off is passed
  // over in a second, not after the call's whole deadline.
  if (channel != nullptr && address_.targets.size() > 1) channel->LimitConnect(kFailoverConnect);
  return channel;
}

std::size_t ControllerClient::Follow(std::string_view active) {
  for (std::size_t i = 0; i < address_.targets.size(); ++i) {
    if (address_.targets[i] == active) return i;
  }
  // A controller the list did not name (ControllerAddr lists it another
  // way): reached as the standby said.
  std::unique_ptr<GrpcChannel> channel = OpenChannel(active);
  if (channel == nullptr) return current_;
  address_.targets.emplace_back(active);
  channels_.push_back(std::move(channel));
  return channels_.size() - 1;
}

absl::Status ControllerClient::OnActive(const CallOn& call) {
  // A call goes to the controller that answered last; one that cannot be
  // reached, or a standby, passes it on (a standby names the active one).
  // While none is active (a takeover takes seconds) the list is tried
  // again until the deadline. A call that reached a controller is never
  // made twice.
  const auto deadline = std::chrono::system_clock::now() + kUnaryDeadline;
  std::size_t failed_in_a_row = 0;
  int redirects = 0;
  for (;;) {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> metadata =
        CallMetadata(address_.targets[current_]);
    if (!metadata.ok()) return metadata.status();
    absl::Status status = call(*channels_[current_], *metadata, deadline);
    const std::string message(status.message());
    const bool standby = absl::IsUnavailable(status) && config::IsNotActive(message);
    if (!standby && !NeverSent(status)) return status;
    if (const std::optional<std::string> active = config::ActiveFromMessage(message);
        active && redirects++ < 4) {
      current_ = Follow(*active);
      continue;
    }
    if (!standby && address_.targets.size() == 1) return status;
    current_ = (current_ + 1) % address_.targets.size();
    if (++failed_in_a_row % address_.targets.size() != 0) continue;
    redirects = 0;
    if (std::chrono::system_clock::now() + kRetryPause >= deadline) return status;
    std::this_thread::sleep_for(kRetryPause);
  }
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ControllerClient::CallMetadata(
    std::string_view target) const {
  // Over the Unix socket the controller reads the caller's uid from the
  // socket itself; over TCP munged vouches for it.
  std::vector<std::pair<std::string, std::string>> metadata;
  if (IsUnix(target) || address_.auth_type == config::AuthType::kNone) return metadata;
  absl::StatusOr<std::string> credential =
      shell::EncodeMungeCredential(address_.munge_socket, shell::kMungeClientPayload);
  if (credential.ok()) {
    metadata.emplace_back("cohort-munge", *std::move(credential));
  } else if (address_.auth_type == config::AuthType::kMunge) {
    return credential.status();
  }
  return metadata;
}

template <typename Response, typename Request>
absl::StatusOr<Response> ControllerClient::Unary(std::string_view method, const Request& request) {
  if (const std::size_t size = request.ByteSizeLong(); size > kMaxRequestBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "the request is {:.1f} MiB, larger than the {} MiB the controller takes; a batch script "
        "should run the program rather than hold its data (put data in files the job reads)",
        static_cast<double>(size) / (1024 * 1024), kMaxRequestBytes / (1024 * 1024)));
  }
  Response response;
  absl::Status status = OnActive([&](GrpcChannel& channel, const GrpcChannel::Metadata& metadata,
                                     GrpcChannel::Deadline deadline) {
    return channel.Call(Method(method), request, response, metadata, deadline);
  });
  if (!status.ok()) return status;
  return response;
}

#define COHORT_CLIENT_DEFINE_CALL(Method, Request, Response, Area, Caller)            \
  absl::StatusOr<v1::Response> ControllerClient::Method(const v1::Request& request) { \
    return Unary<v1::Response>(#Method, request);                                     \
  }
COHORT_CONTROLLER_RPCS(COHORT_CLIENT_DEFINE_CALL)
#undef COHORT_CLIENT_DEFINE_CALL

absl::Status ControllerClient::WatchJob(const v1::WatchJobRequest& request,
                                        const std::function<void(const v1::JobEvent&)>& on_event,
                                        const CallCanceller& canceller) {
  // A connection of its own: unary calls (a cancel) go on beside the stream.
  bool decoded = true;
  absl::Status status = OnActive([&](GrpcChannel& /*unary*/, const GrpcChannel::Metadata& metadata,
                                     GrpcChannel::Deadline /*deadline*/) {
    // Connect checked every address, and Follow each one it added.
    std::unique_ptr<GrpcChannel> stream = OpenChannel(Address());
    return stream->ServerStream(
        Method("WatchJob"), request, metadata,
        [&](std::string_view message) {
          v1::JobEvent event;
          decoded = event.ParseFromArray(message.data(), static_cast<int>(message.size()));
          if (decoded) on_event(event);
          return decoded;
        },
        canceller);
  });
  if (!decoded) return absl::InternalError("an event of the controller could not be decoded");
  return status;
}

void ControllerClient::PrintError(const absl::Status& status) const {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      std::cerr << fmt::format(
          "cohort: cannot reach the controller at {}: {}; is cohort-controller running? (set "
          "--controller or COHORT_CONTROLLER)\n",
          fmt::join(address_.targets, ","), status);
      break;
    case absl::StatusCode::kDeadlineExceeded:
      std::cerr << fmt::format(
          "cohort: the controller at {} did not answer within {} s; it may be overloaded, try "
          "again\n",
          Address(), kUnaryDeadline.count());
      break;
    default:
      std::cerr << fmt::format("cohort: {}\n", status);
      break;
  }
}

int CallController(const ConnectionOptions& options,
                   const std::function<absl::Status(ControllerClient&)>& body) {
  absl::StatusOr<ControllerClient> client = ControllerClient::Connect(options);
  if (!client.ok()) {
    std::cerr << fmt::format("cohort: {}\n", client.status());
    return 2;
  }
  if (absl::Status status = body(*client); !status.ok()) {
    client->PrintError(status);
    return 1;
  }
  return 0;
}

}  // namespace cohort::cli
