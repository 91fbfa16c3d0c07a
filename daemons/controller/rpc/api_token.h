// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

/// Tokens for the REST API, as slurmrestd's auth/jwt: a JSON Web Token
/// (RFC 7519) signed with HMAC-SHA256 under a key only the controller
/// reads. `cohort token` asks the controller for one; a client presents it
/// as `Authorization: Bearer TOKEN`. The token names its user (`sun`, as
/// Slurm's, and `uid`) and when it expires (`exp`); it cannot be changed
/// without the key, and replacing the key revokes every token.
namespace cohort::controller {

/// Who a valid token vouches for.
struct TokenClaims {
  std::uint32_t uid = 0;
  std::string user_name;
  std::chrono::system_clock::time_point expires;
};

/// Signs and checks tokens under one key. Immutable once made: any thread.
class TokenSigner {
 public:
  /// The longest life a token may ask for: a year.
  static constexpr std::chrono::seconds kMaxLifespan{365LL * 24 * 3600};

  /// Reads the key from `path` (at least 32 bytes), or, when there is no
  /// file, makes one of 32 random bytes readable by its owner only.
  /// FailedPrecondition naming the file and the fix otherwise (a key
  /// others may read, or one too short).
  [[nodiscard]] static absl::StatusOr<TokenSigner> FromKeyFile(const std::string& path);
  /// Signs under `key` as it is (tests).
  [[nodiscard]] static TokenSigner FromKey(std::string key);

  /// A token for `claims`.
  [[nodiscard]] std::string Issue(const TokenClaims& claims) const;
  /// The claims of `token` when its signature is this key's, its algorithm
  /// HS256 and it has not expired at `now`; Unauthenticated saying what is
  /// wrong and how to get a new one otherwise.
  [[nodiscard]] absl::StatusOr<TokenClaims> Verify(
      std::string_view token,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;

 private:
  explicit TokenSigner(std::string key) : key_(std::move(key)) {}
  [[nodiscard]] std::string Sign(std::string_view signing_input) const;

  std::string key_;
};

/// Base64url without padding (RFC 4648 §5), as JWTs use it.
[[nodiscard]] std::string Base64UrlEncode(std::string_view bytes);
/// The bytes of base64url text, with or without padding; nullopt when it is
/// not base64url, or not the canonical text of its bytes.
[[nodiscard]] std::optional<std::string> Base64UrlDecode(std::string_view text);

}  // namespace cohort::controller
