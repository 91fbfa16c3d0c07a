// SPDX-License-Identifier: Apache-2.0
#include "agents/nvlink_domains.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace cohort::controller {
namespace {

topology::Topology TwoBlocks() {
  topology::TopologyResult built = topology::BuildTopology(
      "SwitchName=leaf Nodes=n[1-5]\nBlockName=a Nodes=n[1-2]\nBlockName=b Nodes=n[3-4]\n",
      "topology.conf", {}, topology::NodeSource::kTopology);
  EXPECT_FALSE(built.diagnostics.HasErrors()) << built.diagnostics.Format();
  return std::move(built.topology);
}

TEST(NvlinkDomainsTest, AgreeingNodesSayNothing) {
  const topology::Topology topology = TwoBlocks();
  NvlinkDomains domains;
  EXPECT_TRUE(domains.Report(topology, "n1", "u1/0").empty());
  EXPECT_TRUE(domains.Report(topology, "n2", "u1/0").empty());
  EXPECT_TRUE(domains.Report(topology, "n3", "u1/1").empty());
  EXPECT_TRUE(domains.Report(topology, "n5", "").empty());
  EXPECT_TRUE(domains.Contradictions(topology).empty());
}

TEST(NvlinkDomainsTest, ABlockSplitAndADomainAcrossBlocksAreNamed) {
  const topology::Topology topology = TwoBlocks();
  NvlinkDomains domains;
  EXPECT_TRUE(domains.Report(topology, "n1", "u1/0").empty());
  EXPECT_EQ(domains.Report(topology, "n2", "u2/0"),
            std::vector<std::string>{
                "n2 and n1 are in block a of topology.conf but report different NVLink domains "
                "(u2/0 and u1/0); fix the BlockName line"});
  EXPECT_EQ(domains.Report(topology, "n3", "u1/0"),
            std::vector<std::string>{
                "n3 and n1 report one NVLink domain (u1/0) but topology.conf puts them in block "
                "b and block a; put them in one BlockName line"});
  EXPECT_EQ(domains.Report(topology, "n5", "u1/0").size(), 1U) << "n5 is in no block";
  // Each pair once, from the node that sorts first: the split block a
  // (n1, n2), n1 and n3 across blocks, n1 and n5 in none.
  EXPECT_EQ(domains.Contradictions(topology),
            (std::vector<std::string>{
                "n1 and n2 are in block a of topology.conf but report different NVLink domains "
                "(u1/0 and u2/0); fix the BlockName line",
                "n1 and n3 report one NVLink domain (u1/0) but topology.conf puts them in block a "
                "and block b; put them in one BlockName line",
                "n3 and n5 report one NVLink domain (u1/0) but topology.conf puts them in block b "
                "and no block; put them in one BlockName line"}));
  // n2 fixed (its fabric now agrees): the block is whole again.
  (void)domains.Report(topology, "n2", "u1/0");
  (void)domains.Report(topology, "n3", "");
  (void)domains.Report(topology, "n5", "");
  EXPECT_TRUE(domains.Contradictions(topology).empty());
}

}  // namespace
}  // namespace cohort::controller
