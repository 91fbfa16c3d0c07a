// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/controller_addrs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort::config {
namespace {

using Targets = std::vector<std::string>;

TEST(ControllerListTest, EntriesKeepTheirOrderAndTakeTheDefaultPort) {
  absl::StatusOr<Targets> list =
      ParseControllerList("ctl1, ctl2:6821,[fd00::1],[::1]:7000,unix:/run/c.sock", 6820, "X");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, (Targets{"ctl1:6820", "ctl2:6821", "[fd00::1]:6820", "[::1]:7000",
                            "unix:/run/c.sock"}));
}

TEST(ControllerListTest, BadEntriesAreNamedWithTheFix) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"ctl1:99999", "port \"99999\" is not a number from 1 to 65535"},
           {"ctl1:", "the port after ':' is missing"},
           {"fd00::1:6820", "an IPv6 address needs brackets"},
           {"[fd00::1", "the IPv6 address has no ']'"},
           {"unix:", "the socket path is missing"},
           {":6820", "the host is missing"},
       }) {
    absl::StatusOr<Targets> list = ParseControllerList("ok:1," + text, 6820, "ControllerAddr");
    ASSERT_FALSE(list.ok()) << text;
    const std::string message(list.status().message());
    EXPECT_NE(message.find("ControllerAddr entry \"" + text + "\""), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_NE(message.find("write HOST:PORT"), std::string::npos) << message;
  }
  EXPECT_FALSE(ParseControllerList(" , ", 6820, "X").ok());
}

TEST(ControllerListTest, WithoutADefaultPortOneIsRequired) {
  EXPECT_FALSE(ParseControllerList("ctl1", 0, "--controller").ok());
  EXPECT_TRUE(ParseControllerList("ctl1:6820,unix:/s", 0, "--controller").ok());
}

TEST(ControllerListTest, TargetsOfAConfigUseItsPort) {
  ClusterConfig config;
  config.controller_port = 7000;
  EXPECT_EQ(ControllerTargets(config), Targets{"127.0.0.1:7000"});
  config.controller_addrs = {"ctl1", "ctl2:7001"};
  EXPECT_EQ(ControllerTargets(config), (Targets{"ctl1:7000", "ctl2:7001"}));
}

TEST(NotActiveTest, TheActiveControllerIsReadBackFromTheMessage) {
  const std::string message = NotActiveMessage("ctl2:6820");
  EXPECT_EQ(message, "not the active controller; the active one is ctl2:6820");
  EXPECT_TRUE(IsNotActive(message));
  EXPECT_EQ(ActiveFromMessage(message), "ctl2:6820");
  const std::string none = NotActiveMessage("");
  EXPECT_TRUE(IsNotActive(none));
  EXPECT_EQ(ActiveFromMessage(none), std::nullopt);
  EXPECT_FALSE(IsNotActive("connect to 127.0.0.1:1: Connection refused"));
  EXPECT_EQ(ActiveFromMessage("the active one is x:1"), std::nullopt);
}

TEST(HostOfTest, HostPartOfEachForm) {
  EXPECT_EQ(HostOf("ctl1:6820"), "ctl1");
  EXPECT_EQ(HostOf("[::1]:6820"), "[::1]");
  EXPECT_EQ(HostOf("unix:/run/c.sock"), "");
}

}  // namespace
}  // namespace cohort::config
