// SPDX-License-Identifier: Apache-2.0
#include "registry_client.h"

#include <gtest/gtest.h>

#include <string>

namespace cohort::image {
namespace {

TEST(RegistryCauseTest, QuotesTheRegistrysErrors) {
  EXPECT_EQ(RegistryCause(404, "Not Found",
                          R"({"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown",)"
                          R"("detail":{"Tag":"nope"}}]})"),
            "404 MANIFEST_UNKNOWN: manifest unknown");
  EXPECT_EQ(RegistryCause(401, "", R"({"errors":[{"code":"UNAUTHORIZED"}]})"), "401 UNAUTHORIZED");
}

TEST(RegistryCauseTest, FallsBackToTheStatusLine) {
  EXPECT_EQ(RegistryCause(502, "Bad Gateway", "<html>proxy error</html>"), "502 Bad Gateway");
  EXPECT_EQ(RegistryCause(503, "", ""), "503");
}

TEST(RegistryCauseTest, KeepsTheRegistrysWordsOnOneLine) {
  EXPECT_EQ(RegistryCause(400, "", R"({"errors":[{"code":"X","message":"two\nlines"}]})"),
            "400 X: two lines");
}

}  // namespace
}  // namespace cohort::image
