// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

// A cohort.conf naming one controller, in a folder of its own that is
// also its StateDir.
class ControllerAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* set = std::getenv("COHORT_CONTROLLER")) saved_ = set;
    unsetenv("COHORT_CONTROLLER");
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("cohort-address-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "cohort.conf")
        << "StateDir=" << dir_.string() << "\nControllerAddr=ctl01\nControllerPort=6820\n";
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    if (saved_) setenv("COHORT_CONTROLLER", saved_->c_str(), 1);
  }

  std::vector<std::string> Targets() const {
    const absl::StatusOr<ControllerAddress> address =
        ResolveControllerAddress({.controller = "", .config = (dir_ / "cohort.conf").string()});
    EXPECT_TRUE(address.ok()) << address.status();
    return address.ok() ? address->targets : std::vector<std::string>{};
  }

  std::filesystem::path dir_;
  std::optional<std::string> saved_;
};

// A login node, or the node where a batch script runs srun, has no
// controller socket: it dials ControllerAddr, as Slurm's commands dial
// SlurmctldHost. The controller's own host uses its socket.
TEST_F(ControllerAddressTest, AHostWithoutTheSocketDialsControllerAddr) {
  EXPECT_EQ(Targets(), std::vector<std::string>{"ctl01:6820"});
  std::ofstream(dir_ / "cohort.sock") << "";
  EXPECT_EQ(Targets(), std::vector<std::string>{"unix:" + (dir_ / "cohort.sock").string()});
}

}  // namespace
}  // namespace cohort::cli
