// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/reservation_timeline.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace cohort {
namespace {

using Millis = ReservationTimeline::Millis;
using testing::ClusterBuilder;

alloc::NodeGrant Gpus(alloc::NodeId node, std::uint64_t mask) {
  return alloc::NodeGrant{node, 4, 0, mask};
}

alloc::GangRequest Shape(int gpus, alloc::Exclusivity exclusivity = alloc::Exclusivity::kShared) {
  alloc::GangRequest gang;
  gang.gpus_per_node = gpus;
  gang.exclusivity = exclusivity;
  return gang;
}

class ReservationTimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = ClusterBuilder().Leaves(2).NodesPerLeaf(4).GpusPerNode(8).Build();
    n1_ = cluster_.Node("n001");
    n2_ = cluster_.Node("n002");
    n3_ = cluster_.Node("n003");
    // n001: half its GPUs until 100. n002: all of them, half until 50, half
    // until 300. n003: all of them, for a job without a limit.
    Hold(Gpus(n1_, 0x0f), Millis{100});
    Hold(Gpus(n2_, 0x0f), Millis{50});
    Hold(Gpus(n2_, 0xf0), Millis{300});
    Hold(Gpus(n3_, 0xff), Millis::max());
  }

  void Hold(const alloc::NodeGrant& grant, Millis end) {
    cluster_.pool.Commit({&grant, 1});
    if (end != Millis::max()) releases_.push_back({end, grant});
  }

  static Millis TimeOf(const ReservationTimeline::Fits& fits, alloc::NodeId node) {
    return fits.time[static_cast<std::size_t>(node)];
  }

  testing::Cluster cluster_;
  alloc::NodeId n1_ = 0;
  alloc::NodeId n2_ = 0;
  alloc::NodeId n3_ = 0;
  std::vector<ReservationTimeline::Release> releases_;
};

TEST_F(ReservationTimelineTest, NodesComeInTheOrderTheyCouldFirstTakeOneNodeOfTheGang) {
  ReservationTimeline timeline(cluster_.pool, releases_);
  const ReservationTimeline::Fits& whole = timeline.FitTimes(Shape(8));
  // Idle nodes count from the first release: a reservation starts when
  // something ends.
  EXPECT_EQ(TimeOf(whole, cluster_.Node("n004")), Millis{50});
  EXPECT_EQ(TimeOf(whole, n1_), Millis{100});
  EXPECT_EQ(TimeOf(whole, n2_), Millis{300});
  EXPECT_EQ(TimeOf(whole, n3_), Millis::max());
  ASSERT_EQ(whole.order.size(), 7U);  // every node but n003
  EXPECT_EQ(whole.order[5], (std::pair{Millis{100}, n1_}));
  EXPECT_EQ(whole.order[6], (std::pair{Millis{300}, n2_}));
  for (std::size_t i = 1; i < whole.order.size(); ++i) {
    EXPECT_LT(whole.order[i - 1], whole.order[i]);
  }

  // Half a node: n001 takes it now, n002 once its first half frees.
  const ReservationTimeline::Fits& half = timeline.FitTimes(Shape(4));
  EXPECT_EQ(TimeOf(half, n1_), Millis{50});
  EXPECT_EQ(TimeOf(half, n2_), Millis{50});
  EXPECT_EQ(TimeOf(half, n3_), Millis::max());

  // An exclusive node must be idle: n001 from 100, n002 from 300.
  const ReservationTimeline::Fits& exclusive =
      timeline.FitTimes(Shape(1, alloc::Exclusivity::kExclusive));
  EXPECT_EQ(TimeOf(exclusive, n1_), Millis{100});
  EXPECT_EQ(TimeOf(exclusive, n2_), Millis{300});
}

TEST_F(ReservationTimelineTest, ADrainedNodeIsNotListed) {
  cluster_.pool.SetCondition(cluster_.Node("n005"), alloc::NodeCondition::kDrained);
  ReservationTimeline timeline(cluster_.pool, releases_);
  const ReservationTimeline::Fits& fits = timeline.FitTimes(Shape(8));
  EXPECT_EQ(TimeOf(fits, cluster_.Node("n005")), Millis::max());
  EXPECT_EQ(fits.order.size(), 6U);
}

TEST_F(ReservationTimelineTest, NothingIsListedWhenNothingEnds) {
  ReservationTimeline timeline(cluster_.pool, {});
  EXPECT_TRUE(timeline.FitTimes(Shape(1)).order.empty());
}

TEST_F(ReservationTimelineTest, AGrantTakenLaterHoldsItsNodeForever) {
  ReservationTimeline timeline(cluster_.pool, releases_);
  const ReservationTimeline::Fits& whole = timeline.FitTimes(Shape(8));
  const ReservationTimeline::Fits& half = timeline.FitTimes(Shape(4));
  const alloc::NodeId n4 = cluster_.Node("n004");
  const alloc::NodeGrant started = Gpus(n4, 0x03);
  cluster_.pool.Commit({&started, 1});
  timeline.NodeChanged(n4);
  EXPECT_EQ(TimeOf(whole, n4), Millis::max());
  EXPECT_EQ(whole.order.size(), 6U);
  EXPECT_EQ(TimeOf(half, n4), Millis{50});
  // A grant on n001 pushes it to its release for half a node, and out of
  // the whole-node list.
  const alloc::NodeGrant more = Gpus(n1_, 0x30);
  cluster_.pool.Commit({&more, 1});
  timeline.NodeChanged(n1_);
  EXPECT_EQ(TimeOf(half, n1_), Millis{100});
  EXPECT_EQ(TimeOf(whole, n1_), Millis::max());
  for (std::size_t i = 1; i < half.order.size(); ++i) EXPECT_LT(half.order[i - 1], half.order[i]);
  EXPECT_EQ(std::count(half.order.begin(), half.order.end(), std::pair{Millis{100}, n1_}), 1);
}

TEST_F(ReservationTimelineTest, AdvanceReleasesWhatEndsByThenAndRewindTakesItBack) {
  ReservationTimeline timeline(cluster_.pool, releases_);
  alloc::NodePool shadow = cluster_.pool;
  const std::vector<alloc::NodeId> nodes{n1_, n2_, n3_};
  timeline.Advance(nodes, Millis{60}, shadow);
  EXPECT_EQ(shadow.Free(n1_).gpus, 0xf0U);
  EXPECT_EQ(shadow.Free(n2_).gpus, 0x0fU);
  EXPECT_EQ(shadow.Free(n3_).gpus, 0U);
  // Later: what ended by 60 is not released twice.
  timeline.Advance(nodes, Millis{300}, shadow);
  EXPECT_EQ(shadow.Free(n1_).gpus, 0xffU);
  EXPECT_EQ(shadow.Free(n2_).gpus, 0xffU);
  EXPECT_TRUE(shadow.IsIdle(n2_));
  timeline.Rewind(shadow);
  for (alloc::NodeId n = 0; n < shadow.NodeCount(); ++n) {
    EXPECT_EQ(shadow.Free(n).gpus, cluster_.pool.Free(n).gpus) << n;
    EXPECT_EQ(shadow.Free(n).cpus, cluster_.pool.Free(n).cpus) << n;
  }
  // And from the start again after a rewind.
  timeline.Advance(nodes, Millis{100}, shadow);
  EXPECT_EQ(shadow.Free(n1_).gpus, 0xffU);
  EXPECT_EQ(shadow.Free(n2_).gpus, 0x0fU);
  timeline.Rewind(shadow);
}

TEST(MayFitOneNodeTest, AnExclusiveGangNeedsAnIdleNode) {
  alloc::NodeCapacity capacity;
  capacity.cpus = 64;
  capacity.memory_mb = 1024;
  capacity.gpus = 8;
  alloc::NodeFree free{64, 1024, 0xff};
  EXPECT_TRUE(MayFitOneNode(Shape(1, alloc::Exclusivity::kExclusive), capacity, free));
  free.cpus = 63;
  EXPECT_FALSE(MayFitOneNode(Shape(1, alloc::Exclusivity::kExclusive), capacity, free));
  EXPECT_TRUE(MayFitOneNode(Shape(8), capacity, free));
  free.gpus = 0x7f;
  EXPECT_FALSE(MayFitOneNode(Shape(8), capacity, free));
  EXPECT_TRUE(MayFitOneNode(Shape(7), capacity, free));
}

}  // namespace
}  // namespace cohort
