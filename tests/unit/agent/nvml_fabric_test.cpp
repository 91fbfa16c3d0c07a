// SPDX-License-Identifier: Apache-2.0
#include "nvml_fabric.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace cohort::agent {
namespace {

class NvmlFabricTest : public ::testing::Test {
 protected:
  void Record(const std::string& lines) {
    path_ = ::testing::TempDir() + "/nvml-standin.txt";
    std::ofstream(path_) << lines;
    ::setenv("COHORT_NVML_STANDIN", path_.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("COHORT_NVML_STANDIN"); }
  std::string path_;
};

TEST_F(NvmlFabricTest, ReadsEachGpusClusterAndClique) {
  Record(
      "0123456789abcdef0123456789abcdef 7\n"
      "0123456789abcdef0123456789abcdef 7\n"
      "- 0\n");
  const absl::StatusOr<std::vector<GpuFabric>> fabrics = ReadGpuFabrics(COHORT_NVML_STANDIN_LIB);
  ASSERT_TRUE(fabrics.ok()) << fabrics.status();
  ASSERT_EQ(fabrics->size(), 3U);
  EXPECT_EQ((*fabrics)[0].cluster_uuid, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ((*fabrics)[0].clique_id, 7U);
  EXPECT_EQ((*fabrics)[2].cluster_uuid, "") << "a GPU not yet in its fabric has no domain";
  EXPECT_EQ(NvlinkDomainOf(*fabrics), "0123456789abcdef0123456789abcdef/7");
  EXPECT_EQ(NvlinkDomainOf({{}, {}}), "");
}

TEST_F(NvmlFabricTest, NoDriverIsNotFoundAndAFailedStartIsSaid) {
  const absl::StatusOr<std::vector<GpuFabric>> missing =
      ReadGpuFabrics("/nonexistent/libnvidia-ml.so.1");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  // The stand-in without its file fails nvmlInit_v2, as NVML without a driver.
  const absl::StatusOr<std::vector<GpuFabric>> failed = ReadGpuFabrics(COHORT_NVML_STANDIN_LIB);
  EXPECT_TRUE(absl::IsFailedPrecondition(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find("nvmlInit_v2 failed"), std::string_view::npos);
}

TEST_F(NvmlFabricTest, TheLibraryComesFromTheEnvironment) {
  ::unsetenv("COHORT_NVML_LIBRARY");
  EXPECT_EQ(NvmlLibrary(), "libnvidia-ml.so.1");
  ::setenv("COHORT_NVML_LIBRARY", "/opt/test/libnvml.so", 1);
  EXPECT_EQ(NvmlLibrary(), "/opt/test/libnvml.so");
  ::unsetenv("COHORT_NVML_LIBRARY");
}

}  // namespace
}  // namespace cohort::agent
