// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"

namespace cohort::image {
namespace {

TEST(CredentialsTest, EntriesAcrossLinesWithComments) {
  absl::StatusOr<std::vector<Credential>> credentials = ParseCredentials(
      "# NGC\n"
      "machine nvcr.io login $oauthtoken password abc # trailing comment\n"
      "machine 127.0.0.1:5000\n"
      "  login alice\n"
      "  password s3cret\n"
      "default login anon password none\n",
      "creds");
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  ASSERT_EQ(credentials->size(), 3U);
  EXPECT_EQ((*credentials)[0].machine, "nvcr.io");
  EXPECT_EQ((*credentials)[0].login, "$oauthtoken");
  EXPECT_EQ((*credentials)[0].password, "abc");
  EXPECT_EQ((*credentials)[1].login, "alice");
  EXPECT_EQ((*credentials)[2].machine, "");

  EXPECT_EQ(FindCredential(*credentials, "nvcr.io", "")->password, "abc");
  EXPECT_EQ(FindCredential(*credentials, "127.0.0.1:5000", "")->login, "alice");
  EXPECT_EQ(FindCredential(*credentials, "ghcr.io", "")->login, "anon");
  EXPECT_EQ(FindCredential(*credentials, "nvcr.io", "bob"), nullptr);
}

TEST(CredentialsTest, HostWithoutPortMatchesAnyPort) {
  absl::StatusOr<std::vector<Credential>> credentials =
      ParseCredentials("machine 127.0.0.1 login u password p", "creds");
  ASSERT_TRUE(credentials.ok());
  ASSERT_NE(FindCredential(*credentials, "127.0.0.1:5000", ""), nullptr);
  EXPECT_EQ(FindCredential(*credentials, "127.0.0.2:5000", ""), nullptr);
}

TEST(CredentialsTest, ErrorsNameTheLineAndNeverThePassword) {
  absl::StatusOr<std::vector<Credential>> bad =
      ParseCredentials("machine a login u password p\nmachine b login u\n", "creds");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "creds:2: the entry for b has no password; write machine HOST login USER password "
            "PASS");
  bad = ParseCredentials("machine a login u password p\nhost x\n", "creds");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("creds:2: unknown word \"host\""), std::string::npos);
  bad = ParseCredentials("machine a login u password", "creds");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("needs a value"), std::string::npos);
  bad = ParseCredentials("login u password hunter2", "creds");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()).find("hunter2"), std::string::npos);
}

TEST(CredentialsTest, RefusesWhatIsNotARegularFile) {
  char folder[] = "/tmp/cohort-credentials-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::string fifo = std::string(folder) + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> text = ReadCredentialsFile(fifo, std::nullopt);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition) << text.status();
  EXPECT_EQ(ReadCredentialsFile(folder, std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadCredentialsFile(std::string(folder) + "/none", std::nullopt).status().code(),
            absl::StatusCode::kNotFound);
  const std::string file = std::string(folder) + "/creds";
  std::ofstream(file) << "machine a login u password p\n";
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  text = ReadCredentialsFile(file, std::nullopt);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "machine a login u password p\n");
  if (::geteuid() == 0) {
    // Root reads it as nobody, who may not; and is root again afterwards.
    ASSERT_EQ(::chmod(folder, 0755), 0);
    EXPECT_EQ(ReadCredentialsFile(file, 65534).status().code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(::geteuid(), 0U);
    EXPECT_EQ(::getegid(), 0U);
  }
  ::unlink(file.c_str());
  ::unlink(fifo.c_str());
  ::rmdir(folder);
}

}  // namespace
}  // namespace cohort::image
