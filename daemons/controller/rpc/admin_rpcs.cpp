// SPDX-License-Identifier: Apache-2.0
#include "rpc/admin_rpcs.h"

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cohort/config/config_listing.h"
#include "controller_log.h"

namespace cohort::controller {

AdminRpcs::AdminRpcs(boost::asio::io_context& state_io, const ControllerState& state,
                     std::optional<TokenSigner> signer, Reconfigurer reconfigure)
    : io_(state_io),
      state_(state),
      started_ms_(ControllerState::Now().count()),
      // The pid stays across the exec of a restart in place; the start
      // time does not.
      instance_(fmt::format("{}-{}", ::getpid(), started_ms_)),
      signer_(std::move(signer)),
      reconfigure_(std::move(reconfigure)) {}

void AdminRpcs::IssueToken(v1::IssueTokenRequest& request, const Identity& who,
                           Reply<v1::IssueTokenResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "issuing a token"); !trusted.ok()) {
    reply(trusted);
    return;
  }
  if (who.trust == Identity::Trust::kToken) {
    reply(absl::PermissionDeniedError(
        "a token cannot issue another; ask with cohort token, which MUNGE or the controller's "
        "local socket vouches for"));
    return;
  }
  if (!signer_) {
    reply(absl::FailedPreconditionError(
        "this controller issues no tokens: it started without a token key (TokenKeyFile)"));
    return;
  }
  const std::chrono::seconds lifespan =
      request.lifespan_s() == 0 ? kDefaultLifespan : std::chrono::seconds(request.lifespan_s());
  if (lifespan <= std::chrono::seconds::zero() || lifespan > TokenSigner::kMaxLifespan) {
    reply(absl::InvalidArgumentError(
        fmt::format("lifespan {} s is out of range; give 1 to {} seconds (a year)",
                    request.lifespan_s(), TokenSigner::kMaxLifespan.count())));
    return;
  }
  TokenClaims claims{.uid = who.uid, .user_name = who.user_name, .expires = {}};
  if (!request.user_name().empty() && request.user_name() != who.user_name) {
    if (!who.is_operator) {
      reply(absl::PermissionDeniedError(fmt::format(
          "{} may not issue a token for {}; only root and the users of Operators= may, and "
          "everyone for themselves (leave --user out)",
          who.user_name, request.user_name())));
      return;
    }
    passwd entry{};
    passwd* found = nullptr;
    char buffer[1024];
    if (::getpwnam_r(request.user_name().c_str(), &entry, buffer, sizeof(buffer), &found) != 0 ||
        found == nullptr) {
      reply(absl::NotFoundError(fmt::format(
          "no user {} in this host's user database; name a user the controller's host knows",
          request.user_name())));
      return;
    }
    claims.uid = entry.pw_uid;
    claims.user_name = request.user_name();
  }
  const auto now = std::chrono::system_clock::now();
  claims.expires = std::chrono::time_point_cast<std::chrono::seconds>(now + lifespan);
  v1::IssueTokenResponse response;
  response.set_token(signer_->Issue(claims));
  response.set_user_name(claims.user_name);
  response.set_expires_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(claims.expires.time_since_epoch())
          .count());
  Log("rpc")->info("token_issued user={} by={} lifespan_s={}", claims.user_name, who.user_name,
                   lifespan.count());
  reply(std::move(response));
}

void AdminRpcs::Reconfigure(v1::ReconfigureRequest& /*request*/, const Identity& who,
                            Reply<v1::ReconfigureResponse> reply) {
  if (who.trust == Identity::Trust::kAnonymous || who.uid != 0) {
    reply(absl::PermissionDeniedError(fmt::format(
        "{} may not reconfigure the controller; only root may (sudo cohort reconfigure), or "
        "send the controller SIGHUP",
        who.trust == Identity::Trust::kAnonymous ? std::string("an anonymous caller")
                                                 : who.user_name)));
    return;
  }
  if (!reconfigure_) {
    reply(absl::FailedPreconditionError("this controller cannot reread its configuration"));
    return;
  }
  absl::StatusOr<std::string> done = reconfigure_();
  if (!done.ok()) {
    reply(done.status());
    return;
  }
  v1::ReconfigureResponse response;
  response.set_summary(*std::move(done));
  reply(std::move(response));
}

void AdminRpcs::Ping(v1::PingRequest& /*request*/, const Identity& /*who*/,
                     Reply<v1::PingResponse> reply) {
  v1::PingResponse response;
  response.set_instance(instance_);
  response.set_started_ms(started_ms_);
  response.set_cluster_name(state_.config.cluster_name);
  reply(std::move(response));
}

void AdminRpcs::GetConfig(v1::GetConfigRequest& /*request*/, const Identity& /*who*/,
                          Reply<v1::GetConfigResponse> reply) {
  v1::GetConfigResponse response;
  response.set_as_of_ms(started_ms_);
  for (config::ConfigLine& line : config::ListConfig(
           state_.config,
           std::chrono::duration_cast<std::chrono::seconds>(Engine::kFinishedRetention).count())) {
    v1::ConfigEntry& entry = *response.add_entries();
    entry.set_name(std::move(line.name));
    entry.set_value(std::move(line.value));
  }
  reply(std::move(response));
}

}  // namespace cohort::controller
