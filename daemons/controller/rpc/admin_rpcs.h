// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "rpc/api_token.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's calls on the controller itself: issuing REST
/// API tokens (`cohort token`, as `scontrol token`), rereading the
/// configuration (`cohort reconfigure`, as `scontrol reconfigure`), and
/// saying which controller answers and what configuration it runs
/// (`scontrol ping`, `scontrol show config`). On the state thread (io());
/// they read no scheduler state themselves.
class AdminRpcs {
 public:
  /// The lifespan of a token when the caller names none, as Slurm's.
  static constexpr std::chrono::seconds kDefaultLifespan{1800};

  /// Rereads cohort.conf and the topology and, when they are valid with
  /// the jobs held now, applies them: the summary said to the caller, or
  /// InvalidArgument with every error located. State thread.
  using Reconfigurer = std::function<absl::StatusOr<std::string>()>;

  AdminRpcs(boost::asio::io_context& state_io, const ControllerState& state,
            std::optional<TokenSigner> signer, Reconfigurer reconfigure);

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  /// Errors: PermissionDenied (anonymous callers, token holders asking for
  /// another, users asking for someone else), InvalidArgument (a lifespan
  /// out of range), FailedPrecondition (a controller without a token key).
  void IssueToken(v1::IssueTokenRequest& request, const Identity& who,
                  Reply<v1::IssueTokenResponse> reply);
  /// Root only (PermissionDenied otherwise); FailedPrecondition when this
  /// controller cannot reread its files (started without them).
  void Reconfigure(v1::ReconfigureRequest& request, const Identity& who,
                   Reply<v1::ReconfigureResponse> reply);
  /// Anyone: this process's instance, which a restart in place (reconfigure)
  /// or a takeover changes, so that a caller can wait for the new one.
  void Ping(v1::PingRequest& request, const Identity& who, Reply<v1::PingResponse> reply);
  /// Anyone: the cluster-wide settings in force (config::ListConfig).
  void GetConfig(v1::GetConfigRequest& request, const Identity& who,
                 Reply<v1::GetConfigResponse> reply);

 private:
  boost::asio::io_context& io_;
  const ControllerState& state_;
  std::int64_t started_ms_ = 0;
  std::string instance_;
  std::optional<TokenSigner> signer_;
  Reconfigurer reconfigure_;
};

}  // namespace cohort::controller
