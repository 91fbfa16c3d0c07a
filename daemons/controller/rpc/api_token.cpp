// SPDX-License-Identifier: Apache-2.0
#include "rpc/api_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "cluster_files.h"

namespace cohort::controller {
namespace {

constexpr std::size_t kTokenKeyBytes = 32;
constexpr std::string_view kTokenHeader = R"({"alg":"HS256","typ":"JWT"})";

absl::Status KeyFileError(const std::string& path, std::string_view what) {
  return absl::FailedPreconditionError(fmt::format(
      "token key {}: {}; remove it to have the controller make a new one (every token issued "
      "under it stops working), or set TokenKeyFile to a key of at least {} bytes readable by "
      "the controller only",
      path, what, kTokenKeyBytes));
}

// Makes a key of random bytes at `path`, readable by its owner only.
absl::Status MakeKeyFile(const std::string& path) {
  std::array<unsigned char, kTokenKeyBytes> key{};
  if (::getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size())) {
    return KeyFileError(path, fmt::format("no random bytes: {}", std::strerror(errno)));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return KeyFileError(path, fmt::format("cannot create: {}", std::strerror(errno)));
  const bool written = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced) return KeyFileError(path, "cannot write the new key");
  return absl::OkStatus();
}

absl::StatusOr<TokenClaims> Refused(std::string_view why) {
  return absl::UnauthenticatedError(
      fmt::format("the token is refused: {}; get a new one with: cohort token", why));
}

}  // namespace

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = ::EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()),
                                  static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string standard(text);
  for (char& c : standard) {
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    } else if (c == '+' || c == '/') {
      return std::nullopt;  // base64, not base64url
    }
  }
  const std::size_t padding = (4 - standard.size() % 4) % 4;
  standard.append(padding, '=');
  std::string out(standard.size() / 4 * 3, '\0');
  const int n = ::EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(standard.data()),
                                  static_cast<int>(standard.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - padding);  // EVP_DecodeBlock counts padding as zeros
  // One text per byte string: unused low bits of the last character must
  // be zero, so that a changed token never verifies as the same one.
  if (Base64UrlEncode(out) != text) return std::nullopt;
  return out;
}

absl::StatusOr<TokenSigner> TokenSigner::FromKeyFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno != ENOENT) return KeyFileError(path, std::strerror(errno));
    if (absl::Status made = MakeKeyFile(path); !made.ok()) return made;
    if (::stat(path.c_str(), &info) != 0) return KeyFileError(path, std::strerror(errno));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return KeyFileError(
        path, fmt::format("others may read it (mode {:o}); chmod 600 it", info.st_mode & 0777));
  }
  if (!S_ISREG(info.st_mode)) return KeyFileError(path, "it is not a file");
  absl::StatusOr<std::string> key = shell::ReadFile(path);
  if (!key.ok()) return KeyFileError(path, "cannot read it");
  if (key->size() < kTokenKeyBytes) {
    return KeyFileError(path, fmt::format("it holds {} bytes", key->size()));
  }
  return TokenSigner(*std::move(key));
}

TokenSigner TokenSigner::FromKey(std::string key) { return TokenSigner(std::move(key)); }

std::string TokenSigner::Sign(std::string_view signing_input) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int length = 0;
  ::HMAC(::EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
         reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(),
         mac.data(), &length);
  return {reinterpret_cast<const char*>(mac.data()), length};
}

std::string TokenSigner::Issue(const TokenClaims& claims) const {
  const auto seconds = [](std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  const nlohmann::json payload = {{"iat", seconds(std::chrono::system_clock::now())},
                                  {"exp", seconds(claims.expires)},
                                  {"sun", claims.user_name},
                                  {"uid", claims.uid}};
  std::string token =
      Base64UrlEncode(kTokenHeader) + '.' +
      Base64UrlEncode(payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  const std::string mac = Sign(token);
  return token + '.' + Base64UrlEncode(mac);
}

absl::StatusOr<TokenClaims> TokenSigner::Verify(std::string_view token,
                                                std::chrono::system_clock::time_point now) const {
  const std::size_t first = token.find('.');
  const std::size_t second = first == std::string_view::npos ? first : token.find('.', first + 1);
  if (second == std::string_view::npos || token.find('.', second + 1) != std::string_view::npos) {
    return Refused("it is not a JSON Web Token (three parts separated by dots)");
  }
  const std::optional<std::string> header = Base64UrlDecode(token.substr(0, first));
  const std::optional<std::string> payload =
      Base64UrlDecode(token.substr(first + 1, second - first - 1));
  const std::optional<std::string> mac = Base64UrlDecode(token.substr(second + 1));
  if (!header || !payload || !mac) return Refused("a part of it is not base64url");
  const nlohmann::json head = nlohmann::json::parse(*header, nullptr, /*allow_exceptions=*/false);
  if (!head.is_object() || !head.contains("alg") || !head["alg"].is_string() ||
      head["alg"].get<std::string>() != "HS256") {
    return Refused("its algorithm is not HS256");
  }
  const std::string expected = Sign(token.substr(0, second));
  if (mac->size() != expected.size() ||
      ::CRYPTO_memcmp(mac->data(), expected.data(), expected.size()) != 0) {
    return Refused("its signature is not this cluster's (made under another key, or changed)");
  }
  const nlohmann::json body = nlohmann::json::parse(*payload, nullptr, false);
  if (!body.is_object() || !body.contains("exp") || !body["exp"].is_number_integer() ||
      !body.contains("uid") || !body["uid"].is_number_unsigned() || !body.contains("sun") ||
      !body["sun"].is_string()) {
    return Refused("its claims lack exp, uid or sun");
  }
  TokenClaims claims;
  claims.uid = body["uid"].get<std::uint32_t>();
  claims.user_name = body["sun"].get<std::string>();
  claims.expires =
      std::chrono::system_clock::time_point(std::chrono::seconds(body["exp"].get<std::int64_t>()));
  if (claims.expires <= now) return Refused("it has expired");
  return claims;
}

}  // namespace cohort::controller
