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

TEST(NvlinkDomainsTest, BlocksFollowTheReportsAndKeepTheUnheardNodesBlocks) {
  const topology::Topology topology = TwoBlocks();
  NvlinkDomains domains;
  // Nothing heard since the start: the blocks written before it stand.
  NvlinkDomains::BlockFile file = domains.Blocks(topology);
  EXPECT_NE(file.text.find("BlockName=a Nodes=n[1-2]\nBlockName=b Nodes=n[3-4]\n"),
            std::string::npos)
      << file.text;
  EXPECT_TRUE(file.text.starts_with("# TopologyBlocks=auto"));
  // n1 and n2 report one fabric, n3 none: their blocks follow the reports;
  // n4, not heard yet, stays in b.
  (void)domains.Report(topology, "n2", "00112233445566778899aabbccddeeff/1");
  (void)domains.Report(topology, "n1", "00112233445566778899aabbccddeeff/1");
  (void)domains.Report(topology, "n3", "");
  file = domains.Blocks(topology);
  EXPECT_NE(file.text.find("BlockName=nvl-00112233-1 Nodes=n[1-2]\nBlockName=b Nodes=n4\n"),
            std::string::npos)
      << file.text;
  EXPECT_EQ(file.blocks, 2);
  EXPECT_EQ(file.nodes, 3);
  (void)domains.Report(topology, "n4", "00112233445566778899aabbccddeeff/2");
  (void)domains.Report(topology, "n3", "00112233445566778899aabbccddeeff/2");
  const std::string lines = domains.Blocks(topology).text;
  EXPECT_NE(lines.find("BlockName=nvl-00112233-1 Nodes=n[1-2]\nBlockName=nvl-00112233-2 "
                       "Nodes=n[3-4]\n"),
            std::string::npos)
      << lines;
  // Two fabrics whose UUIDs share 8 digits are named in full.
  (void)domains.Report(topology, "n5", "00112233ffffffffffffffffffffffff/1");
  EXPECT_NE(domains.Blocks(topology).text.find(
                "BlockName=nvl-00112233445566778899aabbccddeeff-1 Nodes=n[1-2]"),
            std::string::npos)
      << domains.Blocks(topology).text;
  // The lines build the same blocks as topology.conf would.
  const topology::ReportedBlocks reported{lines, "nvlink-blocks.conf"};
  const topology::TopologyResult built =
      topology::BuildTopology("SwitchName=s Nodes=n[1-5]\n", "topology.conf", {},
                              topology::NodeSource::kTopology, &reported);
  ASSERT_FALSE(built.diagnostics.HasErrors()) << built.diagnostics.Format();
  ASSERT_EQ(built.topology.Blocks().size(), 2U);
  EXPECT_EQ(built.topology.Blocks()[0].name, "nvl-00112233-1");
}

}  // namespace
}  // namespace cohort::controller
