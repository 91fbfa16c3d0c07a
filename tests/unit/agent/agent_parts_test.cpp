// SPDX-License-Identifier: Apache-2.0
// Pure parts of the agent: the health check's reason, and which GPU
// devices a launch is kept off.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <optional>
#include <string>
#include <vector>

#include "cohort/launch/node_layout.h"
#include "health_check.h"
#include "launch_isolation.h"

namespace cohort::agent {
namespace {

// Wait statuses as waitpid reports them.
int Exited(int code) { return code << 8; }
int Killed(int signal) { return signal; }

TEST(HealthReasonTest, TheFirstLineOfOutputElseHowTheCheckEnded) {
  EXPECT_EQ(HealthReason("\n  \n  /scratch is 97% full  \nmore\n", Exited(1)),
            "/scratch is 97% full");
  EXPECT_EQ(HealthReason("", Exited(2)), "exit code 2");
  EXPECT_EQ(HealthReason(" \n\t\n", Killed(SIGKILL)), "killed by signal KILL");
  EXPECT_EQ(HealthReason(std::string(500, 'x'), Exited(1)).size(), 200U) << "kept short";
}

TEST(LaunchIsolationTest, ALaunchIsKeptOffTheGpusItWasNotGranted) {
  const std::vector<std::optional<dev_t>> devices = {makedev(195, 0), makedev(195, 1), std::nullopt,
                                                     makedev(195, 3)};
  EXPECT_EQ(DeniedGpus(devices, 0b0001), (std::vector<dev_t>{makedev(195, 1), makedev(195, 3)}));
  EXPECT_EQ(DeniedGpus(devices, 0b1011), std::vector<dev_t>{}) << "an unknown file: nothing";
  // Two GPUs behind one device file (a shared render node): granted one,
  // the file stays open to the launch.
  const std::vector<std::optional<dev_t>> shared = {makedev(226, 128), makedev(226, 128)};
  EXPECT_EQ(DeniedGpus(shared, 0b01), std::vector<dev_t>{});
}

TEST(LaunchIsolationTest, GpuFilesDefaultToWhereTheGpuWasFound) {
  layout::NodeLayout node;
  node.gpus = {{.index = 0, .name = "/dev/nvidia3", .pci_bus_id = "", .numa = 0},
               {.index = 1, .name = "nvml5", .pci_bus_id = "", .numa = 0},
               {.index = 2, .name = "config", .pci_bus_id = "", .numa = 0}};
  EXPECT_EQ(DefaultGpuFiles(node),
            (std::vector<std::string>{"/dev/nvidia3", "/dev/nvidia5", "/dev/nvidia2"}));
  layout::NodeLayout amd;
  amd.gpus = {{.index = 0,
               .name = "rsmi0",
               .pci_bus_id = "",
               .numa = 0,
               .model = "",
               .amd = true,
               .render_node = "renderD130"},
              {.index = 1, .name = "rsmi1", .pci_bus_id = "", .numa = 0, .model = "", .amd = true}};
  EXPECT_EQ(DefaultGpuFiles(amd),
            (std::vector<std::string>{"/dev/dri/renderD130", "/dev/dri/renderD129"}));
  EXPECT_EQ(GpuDevices(std::vector<std::string>{"/dev/null", "/nonexistent"}),
            (std::vector<std::optional<dev_t>>{makedev(1, 3), std::nullopt}));
}

TEST(LaunchIsolationTest, ImexChannelMajorFromProcDevices) {
  constexpr std::string_view kProcDevices =
      "Character devices:\n  1 mem\n195 nvidia\n508 nvidia-caps-imex-channels\n\n"
      "Block devices:\n  8 sd\n";
  EXPECT_EQ(CharDeviceMajor(kProcDevices, "nvidia-caps-imex-channels"), 508);
  EXPECT_EQ(CharDeviceMajor(kProcDevices, "nvidia"), 195);
  EXPECT_EQ(CharDeviceMajor(kProcDevices, "sd"), std::nullopt);
}

// The channel's own file is made when missing (as root, with the major
// given); the other channels' files in the folder are denied.
TEST(LaunchIsolationTest, ImexChannelAccessDeniesTheOtherChannels) {
  if (::geteuid() != 0) GTEST_SKIP() << "making device files needs root";
  const std::string dir = ::testing::TempDir() + "/imex-access";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const unsigned channel : {0U, 2U}) {
    const std::string file = dir + "/channel" + std::to_string(channel);
    ASSERT_EQ(::mknod(file.c_str(), S_IFCHR | 0600, makedev(240, channel)), 0) << file;
  }
  const ImexAccess access = ImexChannelAccess(dir, 240, 1);
  EXPECT_EQ(access.file, dir + "/channel1");
  EXPECT_EQ(access.problem, "");
  struct stat made {};
  ASSERT_EQ(::stat(access.file.c_str(), &made), 0);
  EXPECT_TRUE(S_ISCHR(made.st_mode));
  EXPECT_EQ(made.st_rdev, makedev(240, 1));
  EXPECT_EQ(access.denied, (std::vector<dev_t>{makedev(240, 0), makedev(240, 2)}));
  // Without a major there is nothing to make it with: said, not made.
  const ImexAccess unknown = ImexChannelAccess(dir + "/none", -1, 4);
  if (!std::filesystem::exists(unknown.file)) {
    EXPECT_NE(unknown.problem, "");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort::agent
