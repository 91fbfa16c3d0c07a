// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"
#include "cohort/v1/cohort.pb.h"
#include "store/wire.h"

namespace cohort::controller {

/// Who calls, by the cluster's AuthType: users over TCP by a MUNGE
/// credential, users on the local socket by its peer credentials, agents by
/// a MUNGE credential of root or CohortUser (AuthType=munge) or the
/// AuthKeyFile key (AuthType=none). Immutable once made: any thread.
/// Decoding asks munged over its socket, a fraction of a millisecond.
class Authenticator {
 public:
  /// Resolves AuthType (unset: munge when munged answers on its socket, else
  /// none), reads AuthKeyFile when agents need it (AuthType=none) and looks
  /// CohortUser up. InvalidArgument saying what to fix otherwise.
  [[nodiscard]] static absl::StatusOr<Authenticator> Make(const config::ClusterConfig& config);

  [[nodiscard]] config::AuthType Type() const { return type_; }  ///< kMunge or kNone
  [[nodiscard]] const std::string& MungeSocket() const { return munge_socket_; }

  /// A caller on the local socket: `uid` from SO_PEERCRED.
  [[nodiscard]] Identity Local(std::uint32_t uid) const;
  /// A caller over TCP presenting `credential` (the `cohort-munge`
  /// metadata; empty: none): the credential's uid, or anonymous with the
  /// reason when it is missing, refused or not a client's.
  [[nodiscard]] Identity OverTcp(std::string_view credential) const;
  /// A caller of the REST API presenting a valid token of user `uid`.
  [[nodiscard]] Identity ByToken(std::uint32_t uid) const {
    return Named(uid, Identity::Trust::kToken);
  }
  /// An agent's registration: OK when the TLS client certificate it
  /// connected with (signed by TLSCAFile's CA: `certificate_names`, its DNS
  /// names) names the node it registers, or when its credential is root's
  /// or CohortUser's and was made for that node (or, with AuthType=none,
  /// when it shows the cluster key). PermissionDenied saying what to fix
  /// otherwise.
  [[nodiscard]] absl::Status VerifyAgent(const v1::Register& message,
                                         const std::vector<std::string>& certificate_names) const;

 private:
  Authenticator() = default;
  [[nodiscard]] Identity Named(std::uint32_t uid, Identity::Trust trust) const;

  config::AuthType type_ = config::AuthType::kNone;
  std::string munge_socket_;
  std::string auth_key_;     ///< AuthType=none: what agents must show
  std::string cohort_user_;  ///< CohortUser=
  std::uint32_t cohort_user_uid_ = 0;
  std::vector<std::string> operators_;  ///< Operators=
};

/// The login name of `uid`, or the number when the user database has none;
/// what the database said is kept for a minute (a renamed user is seen
/// under the new name within one). Any thread.
[[nodiscard]] std::string UserNameOf(std::uint32_t uid);

}  // namespace cohort::controller
