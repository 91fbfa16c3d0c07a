// SPDX-License-Identifier: Apache-2.0
#include "step_container.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::step {
namespace {

TEST(StepContainerTest, TheImagesVariablesWinExceptThoseKeptFromTheHost) {
  std::vector<std::string> env = {"PATH=/host/bin", "HOME=/home/alice", "LANG=C.UTF-8",
                                  "SLURM_PROCID=3"};
  MergeImageEnvironment(
      env,
      {"PATH=/usr/local/cuda/bin:/usr/bin", "LANG=en_US.UTF-8", "NCCL_X=1", "broken", "=empty"},
      {"LANG"});
  // Each set variable moves to the end, as SetVariable puts it.
  EXPECT_EQ(env, (std::vector<std::string>{"HOME=/home/alice", "LANG=C.UTF-8", "SLURM_PROCID=3",
                                           "PATH=/usr/local/cuda/bin:/usr/bin", "NCCL_X=1"}));
  // A kept name the host lacks takes the image's value.
  std::vector<std::string> bare = {"A=1"};
  MergeImageEnvironment(bare, {"LANG=en_US.UTF-8"}, {"LANG"});
  EXPECT_EQ(bare, (std::vector<std::string>{"A=1", "LANG=en_US.UTF-8"}));
}

TEST(StepContainerTest, ImageDescriptionsAreRead) {
  absl::StatusOr<ImageInfo> info = ParseImageInfo(
      R"({"reference":"r#tiny:1","digest":"sha256:ab","rootfs":"/c/images/x/rootfs",)"
      R"("env":["PATH=/bin"],"working_dir":"/w","entrypoint":["/init"],"cmd":[],"cached":true})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rootfs, "/c/images/x/rootfs");
  EXPECT_EQ(info->env, std::vector<std::string>{"PATH=/bin"});
  EXPECT_EQ(info->working_dir, "/w");
  EXPECT_EQ(info->entrypoint, std::vector<std::string>{"/init"});
  EXPECT_FALSE(ParseImageInfo("cohort-image: no such image").ok());
  EXPECT_FALSE(ParseImageInfo(R"({"digest":"sha256:ab","rootfs":"relative"})").ok());
}

}  // namespace
}  // namespace cohort::step
