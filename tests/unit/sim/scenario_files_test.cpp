// SPDX-License-Identifier: Apache-2.0
// Scheduling scenarios as files (tests/data/scenarios, docs/simulator.md
// "Scenarios"): each *.scenario played on the real engine must give the
// transcript of the *.expected beside it. COHORT_UPDATE_GOLDEN=1 writes the
// transcripts instead, for review in the diff. regressions/ holds one file
// per scheduling bug fixed, named for it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scenario.h"
#include "test_support.h"

namespace cohort::sim {
namespace {

class ScenarioFilesTest : public testing::UtcTest {};

std::vector<std::filesystem::path> Scenarios() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::DataPath("scenarios"))) {
    if (entry.path().extension() == ".scenario") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(ScenarioFilesTest, EveryScenarioGivesTheTranscriptItExpects) {
  const std::vector<std::filesystem::path> scenarios = Scenarios();
  EXPECT_GE(scenarios.size(), 20U);
  const bool update = std::getenv("COHORT_UPDATE_GOLDEN") != nullptr;
  for (const std::filesystem::path& path : scenarios) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const absl::StatusOr<std::string> transcript =
        RunScenario(text, path.lexically_relative(testing::DataPath("")).string());
    ASSERT_TRUE(transcript.ok()) << transcript.status();
    std::filesystem::path expected = path;
    expected.replace_extension(".expected");
    if (update) {
      std::ofstream(expected) << *transcript;
      continue;
    }
    std::ifstream want(expected);
    ASSERT_TRUE(want.good()) << expected << " is missing; COHORT_UPDATE_GOLDEN=1 writes it";
    const std::string wanted((std::istreambuf_iterator<char>(want)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(*transcript, wanted);
  }
}

TEST_F(ScenarioFilesTest, ALineItCannotReadIsNamedWithTheFix) {
  const std::string cluster =
      "config: NodeName=n[1-2] CPUs=4 MemoryMB=1000\n"
      "config: PartitionName=all Nodes=ALL Default=YES\n";
  const auto error = [](const absl::StatusOr<std::string>& result) {
    return result.ok() ? std::string("(ran)") : std::string(result.status().message());
  };
  EXPECT_EQ(
      error(RunScenario(cluster + "at 0 launch nodes=1\nrun 5\n", "s")),
      "s:3: no verb `launch`; the verbs: submit, cancel, hold, release, requeue, "
      "checkpoint-done, exit, fail, drain, down, resume, lose, return, and for the agents and "
      "the clock register, heartbeat, tick, schedule, rank-exited, released, "
      "launch-failed, step, signal-step, step-rank-exited, end-allocation");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 rank-exited 1 n9\nrun 5\n", "s")),
            "s:3: rank-exited: give a node of the cluster as word 2");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 step x\nrun 5\n", "s")),
            "s:3: step: give a job id as word 1, as 12 or 12_3");
  EXPECT_EQ(error(RunScenario("agents: robots\n" + cluster + "run 5\n", "s")),
            "s:1: agents: robots: give `runner` (the runner plays the agents, the default) or "
            "`script` (the lines do)");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 submit nodes=two\nrun 5\n", "s")),
            "s:3: submit nodes=two: give a whole number");
  EXPECT_EQ(error(RunScenario(cluster + "at 5 submit\nat 1 submit\nrun 5\n", "s")),
            "s:4: at 1 comes before the line above it (at 5); put the lines in time order");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 submit\n", "s")),
            "s:3: the scenario has no `run SECONDS` line; end it with one");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 submit tasks=2147483647\nrun 5\n", "s")),
            "s:3: submit tasks=2147483647: at most 4096, as for any submission");
  EXPECT_EQ(error(RunScenario(cluster + "run 99999999\n", "s")),
            "s:3: run 99999999: a scenario plays at most 2592000 s (30 days), a second at a "
            "time; play less");
  EXPECT_EQ(error(RunScenario(cluster + "at 9 submit\nrun 5\n", "s")),
            "s:4: run 5 ends before the last event (at 9); run longer");
  EXPECT_EQ(error(RunScenario(cluster + "at 0 drain n9\nrun 5\n", "s")),
            "s:3: `drain` needs a node of the cluster first; `n9` is none");
  EXPECT_NE(error(RunScenario("config: NodeName=n1 CPUs=x\nrun 1\n", "s")).find("config: lines"),
            std::string::npos);
}

}  // namespace
}  // namespace cohort::sim
