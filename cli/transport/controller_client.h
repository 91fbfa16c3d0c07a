// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"
#include "cohort/v1/cohort.pb.h"
#include "cohort/v1/controller_rpcs.h"
#include "transport/grpc_channel.h"

/// The CLI's connection to cohort-controller.
namespace cohort::cli {

/// Where the controller is, as the user said it (empty: not said).
struct ConnectionOptions {
  std::string controller;  ///< --controller ADDR
  std::string config;      ///< --config FILE
};

/// Whether `-c` is short for --config on a command. `submit` and `run` keep
/// `-c` for sbatch's --cpus-per-task.
enum class ConfigShortName { kDashC, kNone };

/// Adds --controller ADDR and --config FILE to an online command.
void AddConnectionOptions(CLI::App& command, ConnectionOptions& options,
                          ConfigShortName short_name = ConfigShortName::kDashC);

/// The controllers' addresses: --controller, else $COHORT_CONTROLLER, else
/// from the config (--config, else $COHORT_CONF, else
/// /etc/cohort/cohort.conf) ControllerAddr when it names several
/// controllers, else `unix:<StateDir>/cohort.sock` where that socket is
/// (the controller's host), else ControllerAddr. An address is
/// `HOST:PORT` or `unix:/PATH`; a list separates them by commas. InvalidArgument when the given
/// address is malformed or no config can be read, saying which source it came from and what to do.
struct ControllerAddress {
  /// HOST:PORT or unix:PATH each, in the order tried: one per controller.
  std::vector<std::string> targets;
  config::AuthType auth_type = config::AuthType::kAuto;  ///< the config's AuthType
  std::string munge_socket;                              ///< the config's AuthInfo=socket=
  GrpcChannel::Tls tls;  ///< TLSCertFile is set: TLS over TCP, verified with TLSCAFile
};
[[nodiscard]] absl::StatusOr<ControllerAddress> ResolveControllerAddress(
    const ConnectionOptions& options);

/// Blocking calls to the Controller service, on the caller's thread; any
/// thread may call (a client used by several threads at once must be
/// given one controller). With several controllers a call goes to the
/// active one: a standby's answer names it, and one that cannot be reached
/// is passed over (one that does not take a connection in kFailoverConnect
/// counts as such); while none is active (a takeover) the list is tried
/// again until the deadline. A call that reached a controller is never
/// made twice. Unary calls have a 10 s deadline and share one
/// GrpcChannel (no threads, a fraction of a command's time); each WatchJob
/// stream has a connection of its own, so that unary calls go on beside it.
/// Over TCP every call carries a fresh MUNGE credential in the metadata
/// `cohort-munge` (unless the config says AuthType=none; with AuthType
/// unset a call goes without one when munged does not answer, and may then
/// only read); over the Unix socket none (the controller takes the uid from
/// the peer credentials). The controller looks up the login name itself. Errors are the
/// server's gRPC status as an absl::Status with the same code and message.
class ControllerClient {
 public:
  /// Resolves the address (see ResolveControllerAddress); connects lazily,
  /// on the first call.
  [[nodiscard]] static absl::StatusOr<ControllerClient> Connect(const ConnectionOptions& options);

  /// The controller calls go to now: the first listed until another
  /// answered as the active one.
  [[nodiscard]] const std::string& Address() const { return address_.targets[current_]; }

  // One blocking call per unary call of cohort/v1/controller_rpcs.h:
  // absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest&), ...
#define COHORT_CLIENT_DECLARE_CALL(Method, Request, Response, Area, Caller) \
  [[nodiscard]] absl::StatusOr<v1::Response> Method(const v1::Request& request);
  COHORT_CONTROLLER_RPCS(COHORT_CLIENT_DECLARE_CALL)
#undef COHORT_CLIENT_DECLARE_CALL

  /// Follows a job on the WatchJob stream (no deadline), handing each event
  /// to `on_event`, until the server ends the stream (its status) or
  /// `canceller` is cancelled from another thread (CANCELLED).
  [[nodiscard]] absl::Status WatchJob(const v1::WatchJobRequest& request,
                                      const std::function<void(const v1::JobEvent&)>& on_event,
                                      const CallCanceller& canceller);

  /// Prints `status` to stderr as the user should read it: UNAVAILABLE says
  /// the controller cannot be reached at Address() and how to point at it;
  /// a missed deadline says so; anything else prints the server's message.
  void PrintError(const absl::Status& status) const;

 private:
  explicit ControllerClient(ControllerAddress address);

  template <typename Response, typename Request>
  absl::StatusOr<Response> Unary(std::string_view method, const Request& request);
  /// The metadata of one call to `target`: a fresh MUNGE credential over
  /// TCP (munged's replay cache refuses a credential decoded twice).
  /// Unavailable when AuthType=munge and munged does not answer.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, std::string>>> CallMetadata(
      std::string_view target) const;
  /// Makes `call` on the active controller's channel (see the class).
  using CallOn = std::function<absl::Status(GrpcChannel&, const GrpcChannel::Metadata&,
                                            GrpcChannel::Deadline)>;
  [[nodiscard]] absl::Status OnActive(const CallOn& call);
  /// A channel to `target`, its connections limited to kFailoverConnect
  /// when there are several controllers; nullptr as GrpcChannel::ForTarget.
  [[nodiscard]] std::unique_ptr<GrpcChannel> OpenChannel(std::string_view target) const;
  /// The index of the controller at `active`, added when not listed.
  std::size_t Follow(std::string_view active);

  ControllerAddress address_;
  std::vector<std::unique_ptr<GrpcChannel>> channels_;  ///< one per target, for unary calls
  std::size_t current_ = 0;                             ///< the target calls go to
};

/// Connects as `options` say and runs `body` with the client, which prints
/// the results. Prints what went wrong and returns the exit status: 2 when
/// no controller address can be resolved, 1 when `body` returns an error
/// (such as a failed call), else 0.
int CallController(const ConnectionOptions& options,
                   const std::function<absl::Status(ControllerClient&)>& body);

/// The deadline of unary calls.
inline constexpr std::chrono::seconds kUnaryDeadline{10};
/// With several controllers, how long a connection to one may take before
/// the next is asked (GrpcChannel::LimitConnect).
inline constexpr std::chrono::milliseconds kFailoverConnect{1000};
/// Between rounds of the controller list while none is active.
inline constexpr std::chrono::milliseconds kRetryPause{200};
/// The largest request the controller takes: gRPC's default limit on a
/// received message. A larger one is refused before it is sent.
inline constexpr std::size_t kMaxRequestBytes = 4 * 1024 * 1024;

}  // namespace cohort::cli
