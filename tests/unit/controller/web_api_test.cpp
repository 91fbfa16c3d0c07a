// SPDX-License-Identifier: Apache-2.0
// The REST API's pieces that need no server: tokens (signed, verified,
// refused when forged, expired or of another algorithm), base64url, query
// strings into request messages, and error kinds into HTTP statuses.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include "http/web_service.h"
#include "rpc/api_token.h"

namespace cohort::controller {
namespace {

using std::chrono::system_clock;

TokenClaims Alice(system_clock::time_point expires) {
  return TokenClaims{.uid = 1001, .user_name = "alice", .expires = expires};
}

TEST(TokenTest, AValidTokenNamesItsUser) {
  const TokenSigner signer = TokenSigner::FromKey(std::string(32, 'k'));
  const std::string token = signer.Issue(Alice(system_clock::now() + std::chrono::hours(1)));
  const absl::StatusOr<TokenClaims> claims = signer.Verify(token);
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(claims->uid, 1001U);
  EXPECT_EQ(claims->user_name, "alice");
}

TEST(TokenTest, AnotherKeyAChangedClaimOrAnExpiryIsRefused) {
  const TokenSigner signer = TokenSigner::FromKey(std::string(32, 'k'));
  const TokenSigner other = TokenSigner::FromKey(std::string(32, 'x'));
  const auto now = system_clock::now();
  const std::string token = signer.Issue(Alice(now + std::chrono::hours(1)));
  EXPECT_EQ(other.Verify(token).status().code(), absl::StatusCode::kUnauthenticated);

  // Root's uid in alice's token: the signature no longer matches.
  const std::size_t dot = token.find('.');
  const std::size_t second = token.find('.', dot + 1);
  std::string payload = *Base64UrlDecode(token.substr(dot + 1, second - dot - 1));
  payload.replace(payload.find("1001"), 4, "0000");
  const std::string forged =
      token.substr(0, dot + 1) + Base64UrlEncode(payload) + token.substr(second);
  const absl::Status refused = signer.Verify(forged).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(refused.message().find("signature"), std::string_view::npos) << refused;

  EXPECT_NE(signer.Verify(token, now + std::chrono::hours(2)).status().message().find("expired"),
            std::string_view::npos);
}

TEST(TokenTest, OnlyHs256IsTaken) {
  const TokenSigner signer = TokenSigner::FromKey(std::string(32, 'k'));
  const std::string token = signer.Issue(Alice(system_clock::now() + std::chrono::hours(1)));
  // {"alg":"none"} with no signature: the classic downgrade.
  const std::string none = Base64UrlEncode(R"({"alg":"none","typ":"JWT"})") +
                           token.substr(token.find('.'), token.rfind('.') - token.find('.') + 1);
  EXPECT_NE(signer.Verify(none).status().message().find("HS256"), std::string_view::npos);
  EXPECT_FALSE(signer.Verify("a.b").ok());
  EXPECT_FALSE(signer.Verify("").ok());
  EXPECT_FALSE(signer.Verify("!!.??.**").ok());
}

TEST(TokenTest, TheKeyFileIsMadeOnceAndMustBePrivate) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("cohort-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const std::string path = (folder / "token.key").string();
  absl::StatusOr<TokenSigner> made = TokenSigner::FromKeyFile(path);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(std::filesystem::file_size(path), 32U);
  const std::string token = made->Issue(Alice(system_clock::now() + std::chrono::hours(1)));
  absl::StatusOr<TokenSigner> again = TokenSigner::FromKeyFile(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->Verify(token).ok()) << "a restart keeps the key, and the tokens";

  ::chmod(path.c_str(), 0644);
  const absl::Status shared = TokenSigner::FromKeyFile(path).status();
  EXPECT_NE(shared.message().find("chmod 600"), std::string_view::npos) << shared;
  ::chmod(path.c_str(), 0600);
  std::ofstream(path, std::ios::trunc) << "short";
  EXPECT_NE(TokenSigner::FromKeyFile(path).status().message().find("holds 5 bytes"),
            std::string_view::npos);
  const std::string folder_key = (folder / "key.d").string();
  std::filesystem::create_directories(folder_key);
  ::chmod(folder_key.c_str(), 0700);
  EXPECT_NE(TokenSigner::FromKeyFile(folder_key).status().message().find("not a file"),
            std::string_view::npos)
      << "a folder where the key should be is an error, not an exception";
  std::filesystem::remove_all(folder);
}

TEST(Base64UrlTest, RoundTripsEveryLengthWithTheUrlAlphabet) {
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    const std::string text = Base64UrlEncode(bytes);
    EXPECT_EQ(text.find_first_of("+/="), std::string::npos) << text;
    EXPECT_EQ(Base64UrlDecode(text), bytes);
    bytes += static_cast<char>(0xf0 + i % 16);
  }
  EXPECT_FALSE(Base64UrlDecode("a+b/").has_value());
  EXPECT_FALSE(Base64UrlDecode("abcde").has_value());
  EXPECT_EQ(Base64UrlDecode("QQ"), "A");
  EXPECT_FALSE(Base64UrlDecode("QR").has_value()) << "unused bits set: not canonical";
}

TEST(QueryTest, FieldsRepeatedFieldsAndBoolsFromTheQuery) {
  v1::ListJobsRequest request;
  ASSERT_TRUE(
      MessageFromQuery("all_users&states=JOB_PENDING,JOB_RUNNING&user_name=al%20ice", request)
          .ok());
  EXPECT_TRUE(request.all_users());
  ASSERT_EQ(request.states_size(), 2);
  EXPECT_EQ(request.states(1), v1::JOB_RUNNING);
  EXPECT_EQ(request.user_name(), "al ice");

  v1::JobHistoryRequest history;
  ASSERT_TRUE(MessageFromQuery("jobIds=4,5&limit=10&allUsers=false", history).ok());
  EXPECT_EQ(history.job_ids_size(), 2);
  EXPECT_EQ(history.limit(), 10);
}

TEST(QueryTest, WhatIsNoFieldOrNoValueIsRefusedByName) {
  v1::ListJobsRequest request;
  absl::Status s = MessageFromQuery("colour=blue", request);
  EXPECT_NE(s.message().find("'colour' is not a field of ListJobsRequest"), std::string_view::npos)
      << s;
  EXPECT_NE(s.message().find("all_users, states, user_name"), std::string_view::npos) << s;
  s = MessageFromQuery("all_users=maybe", request);
  EXPECT_NE(s.message().find("give true or false"), std::string_view::npos) << s;
  s = MessageFromQuery("states=JOB_SLEEPING", request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = MessageFromQuery("user_name=%ff%fe", request);
  EXPECT_NE(s.message().find("not UTF-8"), std::string_view::npos) << s;
  s = MessageFromQuery("user_name=%zz", request);
  EXPECT_NE(s.message().find("%-escape"), std::string_view::npos) << s;
  v1::JobHistoryRequest history;
  EXPECT_FALSE(MessageFromQuery("limit=ten", history).ok());
}

TEST(HttpStatusTest, ErrorKindsMapAsRestClientsExpect) {
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("")), 400);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("")), 401);
  EXPECT_EQ(HttpStatusOf(absl::PermissionDeniedError("")), 403);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("")), 404);
  EXPECT_EQ(HttpStatusOf(absl::FailedPreconditionError("")), 409);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("")), 503);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("")), 500);
}

}  // namespace
}  // namespace cohort::controller
