// SPDX-License-Identifier: Apache-2.0
// Pure parts of the agent: the health check's reason, and which GPU
// devices a launch is kept off.
#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

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
  EXPECT_EQ(GpuDevices(std::vector<std::string>{"/dev/null", "/nonexistent"}),
            (std::vector<std::optional<dev_t>>{makedev(1, 3), std::nullopt}));
}

}  // namespace
}  // namespace cohort::agent
