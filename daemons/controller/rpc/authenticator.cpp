// SPDX-License-Identifier: Apache-2.0
#include "rpc/authenticator.h"

#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "cluster_files.h"
#include "cohort/fmt_absl.h"
#include "munge_credential.h"

namespace cohort::controller {
namespace {

// The uid of callers nothing vouches for.
constexpr std::uint32_t kUnvouchedUid = 65534;

// Compares in time that depends on the lengths only, so that timing tells
// a guesser nothing about how much of the key matched.
bool SameKey(std::string_view shown, std::string_view key) {
  if (shown.size() != key.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < key.size(); ++i) {
    differ |= static_cast<unsigned char>(shown[i] ^ key[i]);
  }
  return differ == 0;
}

// A user by name, or a uid as a number (an account without a name).
std::optional<std::uint32_t> UidOf(const std::string& user) {
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (::getpwnam_r(user.c_str(), &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr) {
    return entry.pw_uid;
  }
  std::uint32_t uid = 0;
  const auto [end, error] = std::from_chars(user.data(), user.data() + user.size(), uid);
  if (user.empty() || error != std::errc() || end != user.data() + user.size()) return std::nullopt;
  return uid;
}

}  // namespace

namespace {

// What the user database says of `uid` now: its name, or the number.
std::string LookUpUserName(std::uint32_t uid) {
  passwd entry{};
  passwd* result = nullptr;
  std::vector<char> buffer(1024);
  int error = 0;
  while ((error = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &result)) == ERANGE &&
         buffer.size() < 1024 * 1024) {
    buffer.resize(buffer.size() * 4);
  }
  if (error == 0 && result != nullptr) return entry.pw_name;
  return std::to_string(uid);
}

// Names as looked up, each kept for a minute (as nscd keeps them): a
// lookup reads /etc/passwd or asks NSS's services, which cost a tenth of
// a submission's time when made for every call. Bounded: full, it starts
// again empty.
class UserNames {
 public:
  std::string Of(std::uint32_t uid) {
    const auto now = std::chrono::steady_clock::now();
    {
      const std::lock_guard lock(mutex_);
      if (const auto it = names_.find(uid); it != names_.end() && it->second.until > now) {
        return it->second.name;
      }
    }
    std::string name = LookUpUserName(uid);
    const std::lock_guard lock(mutex_);
    if (names_.size() >= kMaxNames) names_.clear();
    names_.insert_or_assign(uid, Entry{name, now + kKept});
    return name;
  }

 private:
  static constexpr std::size_t kMaxNames = 4096;
  static constexpr std::chrono::seconds kKept{60};
  struct Entry {
    std::string name;
    std::chrono::steady_clock::time_point until;
  };
  std::mutex mutex_;
  std::unordered_map<std::uint32_t, Entry> names_;
};

}  // namespace

std::string UserNameOf(std::uint32_t uid) {
  static UserNames names;
  return names.Of(uid);
}

absl::StatusOr<Authenticator> Authenticator::Make(const config::ClusterConfig& config) {
  Authenticator out;
  out.munge_socket_ = config.munge_socket;
  out.operators_ = config.operators;
  out.cohort_user_ = config.cohort_user;
  out.type_ = config.auth_type;
  if (out.type_ == config::AuthType::kAuto) {
    const absl::StatusOr<std::string> probe =
        shell::EncodeMungeCredential(out.munge_socket_, shell::kMungeClientPayload);
    out.type_ = probe.ok() ? config::AuthType::kMunge : config::AuthType::kNone;
    if (!probe.ok()) {
      spdlog::warn(
          "auth_none reason=\"{}\" hint=\"TCP callers are anonymous and agents prove themselves "
          "with AuthKeyFile; set AuthType=munge once munged runs\"",
          std::string(probe.status().message()));
    }
  }
  if (out.type_ == config::AuthType::kNone) {
    absl::StatusOr<std::string> key = shell::ReadAuthKey(config.auth_key_file);
    if (!key.ok()) {
      return absl::InvalidArgumentError(fmt::format(
          "AuthType=none: agents prove themselves with the cluster key, and {} cannot be read: "
          "{}; create it with: head -c 32 /dev/urandom | base64 > {} && chmod 600 {}, or run "
          "munged and set AuthType=munge",
          config.auth_key_file, std::string(key.status().message()), config.auth_key_file,
          config.auth_key_file));
    }
    out.auth_key_ = *std::move(key);
  }
  const std::optional<std::uint32_t> agent_uid = UidOf(config.cohort_user);
  if (!agent_uid) {
    return absl::InvalidArgumentError(
        fmt::format("CohortUser={}: no such user on this host; create it or name the user (or "
                    "uid) the agents run as",
                    config.cohort_user));
  }
  out.cohort_user_uid_ = *agent_uid;
  return out;
}

Identity Authenticator::Named(std::uint32_t uid, Identity::Trust trust) const {
  Identity who;
  who.uid = uid;
  who.trust = trust;
  who.user_name = UserNameOf(uid);
  who.is_operator = trust != Identity::Trust::kAnonymous &&
                    (uid == 0 || std::find(operators_.begin(), operators_.end(), who.user_name) !=
                                     operators_.end());
  return who;
}

Identity Authenticator::Local(std::uint32_t uid) const {
  return Named(uid, Identity::Trust::kPeerCredentials);
}

Identity Authenticator::OverTcp(std::string_view credential) const {
  auto anonymous = [&](std::string why) {
    Identity who = Named(kUnvouchedUid, Identity::Trust::kAnonymous);
    who.anonymous_why = std::move(why);
    return who;
  };
  if (type_ == config::AuthType::kNone) return anonymous("the cluster has AuthType=none");
  if (credential.empty()) return anonymous("no MUNGE credential came with it");
  absl::StatusOr<shell::MungeIdentity> decoded =
      shell::DecodeMungeCredential(munge_socket_, credential);
  if (!decoded.ok()) return anonymous(std::string(decoded.status().message()));
  if (decoded->payload != shell::kMungeClientPayload) {
    return anonymous("the MUNGE credential was not made for a cohort command");
  }
  return Named(decoded->uid, Identity::Trust::kMunge);
}

absl::Status Authenticator::VerifyAgent(const v1::Register& message,
                                        const std::vector<std::string>& certificate_names) const {
  if (std::find(certificate_names.begin(), certificate_names.end(), message.node_name()) !=
      certificate_names.end()) {
    return absl::OkStatus();
  }
  if (!certificate_names.empty() && message.credential().empty() && message.auth_key().empty()) {
    return absl::PermissionDeniedError(
        fmt::format("the agent's certificate names {}, not node {}; put the node's name in the "
                    "certificate's subjectAltName (DNS:{})",
                    fmt::join(certificate_names, ","), message.node_name(), message.node_name()));
  }
  if (type_ == config::AuthType::kNone) {
    if (!auth_key_.empty() && SameKey(message.auth_key(), auth_key_)) return absl::OkStatus();
    return absl::PermissionDeniedError(
        "the agent's key does not match the cluster's AuthKeyFile (AuthType=none); copy the "
        "controller's key file to this node, or run munged and set AuthType=munge");
  }
  if (message.credential().empty()) {
    return absl::PermissionDeniedError(
        "the agent brought no MUNGE credential and the cluster has AuthType=munge; run munged on "
        "the agent's host with the cluster's MUNGE key and name its socket with AuthInfo=socket=");
  }
  absl::StatusOr<shell::MungeIdentity> decoded =
      shell::DecodeMungeCredential(munge_socket_, message.credential());
  if (!decoded.ok()) {
    return absl::PermissionDeniedError(fmt::format(
        "{}; the agent's munged must share the controller's MUNGE key (/etc/munge/munge.key)",
        std::string(decoded.status().message())));
  }
  if (decoded->uid != 0 && decoded->uid != cohort_user_uid_) {
    return absl::PermissionDeniedError(
        fmt::format("an agent must run as root or CohortUser ({}); this one runs as {}",
                    cohort_user_, UserNameOf(decoded->uid)));
  }
  if (decoded->payload !=
      fmt::format("{}{}", shell::kMungeAgentPayloadPrefix, message.node_name())) {
    return absl::PermissionDeniedError(
        fmt::format("the agent's MUNGE credential was not made for node {}", message.node_name()));
  }
  return absl::OkStatus();
}

}  // namespace cohort::controller
