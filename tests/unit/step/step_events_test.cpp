// SPDX-License-Identifier: Apache-2.0
#include "step_events.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cohort::step {
namespace {

// Applies every line of `text` (a whole event file) to `record` and returns
// the reports, in order; fails the test on a malformed line.
std::vector<LaunchReport> ApplyAll(LaunchRecord& record, std::string_view text) {
  std::vector<LaunchReport> reports;
  const CompleteLines complete = SplitCompleteLines(text);
  for (const std::string_view line : complete.lines) {
    absl::StatusOr<StepEvent> event = ParseStepEvent(line);
    EXPECT_TRUE(event.ok()) << line;
    if (!event.ok()) continue;
    if (std::optional<LaunchReport> report = record.Apply(*event)) reports.push_back(*report);
  }
  return reports;
}

TEST(StepEventsTest, EveryEventRoundTripsThroughItsLine) {
  const std::vector<StepEvent> events = {
      StepdEvent{4242, 987654321},
      RankStartedEvent{3, 4300},
      GroupEvent{4300},
      RankExitEvent{3, 7, 0, 2048, 1500},
      RankExitEvent{4, 0, SIGKILL},
      FailedEvent{"n1: cannot run"},
      ImageEvent{ImageOutcome::kPulled, 2000000, 150},
      ImageEvent{ImageOutcome::kCached, 0, 1},
      ImageEvent{ImageOutcome::kFailed, 0, 30},
      DoneEvent{},
  };
  std::string file;
  for (const StepEvent& event : events) file += FormatStepEvent(event);
  EXPECT_EQ(file,
            "stepd 4242 987654321\nstarted 3 4300\npgid 4300\nexit 3 7 "
            "0 2048 1500\nexit 4 0 9 0 0\n"
            "failed n1: cannot run\nimage pulled 2000000 150\nimage cached 0 1\n"
            "image failed 0 30\ndone\n");
  const CompleteLines complete = SplitCompleteLines(file);
  ASSERT_EQ(complete.lines.size(), events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    absl::StatusOr<StepEvent> parsed = ParseStepEvent(complete.lines[i]);
    ASSERT_TRUE(parsed.ok()) << complete.lines[i];
    EXPECT_EQ(FormatStepEvent(*parsed), FormatStepEvent(events[i]));
  }
}

TEST(LaunchRecordTest, RanksUsageAddsUpAndOlderLinesHaveNone) {
  LaunchRecord record;
  const std::vector<LaunchReport> reports =
      ApplyAll(record, "started 0 10\nstarted 1 11\npgid 10\nexit 0 0 0 4096 250\nexit 1 0 0\n");
  ASSERT_EQ(reports.size(), 3U);
  EXPECT_EQ(std::get<RankExitedReport>(reports[1]).max_rss_kb, 4096);
  EXPECT_EQ(std::get<RankExitedReport>(reports[1]).cpu_ms, 250);
  EXPECT_EQ(std::get<RankExitedReport>(reports[2]).cpu_ms, 0);
  EXPECT_EQ(record.MaxRssKb(), 4096);
  EXPECT_EQ(record.CpuMs(), 250);
  EXPECT_FALSE(ParseStepEvent("exit 0 0 0 -1 5").ok());
}

TEST(StepEventsTest, AReasonStaysOnOneLine) {
  EXPECT_EQ(FormatStepEvent(FailedEvent{"n1: first\nsecond"}), "failed n1: first second\n");
  absl::StatusOr<StepEvent> parsed = ParseStepEvent("failed n1: a  b ");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(std::get<FailedEvent>(*parsed).reason, "n1: a  b ");
}

TEST(StepEventsTest, MalformedLinesAreRefused) {
  for (const std::string_view line : {"",
                                      "exit",
                                      "exit 1 2",
                                      "exit 1 2 3 4",
                                      "exit -1 0 0",
                                      "exit 1 0 -9",
                                      "started 1",
                                      "started 1 0",
                                      "pgid 0",
                                      "pgid x",
                                      "stepd 12",
                                      "done now",
                                      "finished 1",
                                      "exit 1 2 3x",
                                      " done",
                                      "image",
                                      "image pulled 1",
                                      "image lost 0 0",
                                      "image cached -1 0",
                                      "image cached 0 1 2"}) {
    EXPECT_FALSE(ParseStepEvent(line).ok()) << '"' << line << '"';
  }
}

TEST(StepEventsTest, OnlyCompleteLinesAreTaken) {
  const CompleteLines complete = SplitCompleteLines("pgid 7\nexit 0 0 0\nexit 1 0");
  ASSERT_EQ(complete.lines.size(), 2U);
  EXPECT_EQ(complete.lines[1], "exit 0 0 0");
  EXPECT_EQ(complete.consumed, 18U);
  EXPECT_EQ(SplitCompleteLines("done").consumed, 0U);
  EXPECT_TRUE(SplitCompleteLines("").lines.empty());
}

TEST(LaunchRecordTest, ASuccessfulLaunchReportsStartEachExitAndRelease) {
  LaunchRecord record;
  std::vector<LaunchReport> reports =
      ApplyAll(record, "stepd 100 5000\nstarted 2 101\nstarted 3 102\npgid 101\n");
  ASSERT_EQ(reports.size(), 1U);
  const auto& started = std::get<RanksStartedReport>(reports[0]);
  EXPECT_EQ(started.pgid, 101);
  EXPECT_EQ(started.ranks, (std::map<int, pid_t>{{2, 101}, {3, 102}}));
  EXPECT_EQ(record.StepdPid(), 100);
  EXPECT_EQ(record.StepdStartTime(), 5000);
  EXPECT_TRUE(record.Running());
  EXPECT_EQ(record.ProcessGroup(), 101);
  EXPECT_EQ(record.LiveRanks().size(), 2U);

  reports = ApplyAll(record, "exit 3 0 0\nexit 2 0 0\ndone\n");
  ASSERT_EQ(reports.size(), 3U);
  EXPECT_EQ(std::get<RankExitedReport>(reports[0]).rank, 3);
  EXPECT_EQ(std::get<RankExitedReport>(reports[1]).rank, 2);
  EXPECT_TRUE(std::holds_alternative<ReleasedReport>(reports[2]));
  EXPECT_TRUE(record.Done());
  EXPECT_EQ(record.RanksStarted(), 2);
  EXPECT_EQ(record.RanksOk(), 2);
  EXPECT_FALSE(record.FirstFailure());
  EXPECT_TRUE(record.LaunchError().empty());
  EXPECT_TRUE(record.LiveRanks().empty());
}

TEST(LaunchRecordTest, TheFirstFailureIsKeptAndLaterOnesDoNotReplaceIt) {
  LaunchRecord record;
  ApplyAll(record, "stepd 1 1\nstarted 0 10\nstarted 1 11\nstarted 2 12\npgid 10\n");
  ApplyAll(record, "exit 1 3 0\nexit 0 0 15\nexit 2 0 0\ndone\n");
  ASSERT_TRUE(record.FirstFailure());
  EXPECT_EQ(record.FirstFailure()->rank, 1);
  EXPECT_EQ(record.FirstFailure()->exit_code, 3);
  EXPECT_EQ(record.RanksOk(), 1);
}

TEST(LaunchRecordTest, AFailedLaunchIsOneLaunchFailedAndItsKilledRanksAreNotReported) {
  LaunchRecord record;
  const std::vector<LaunchReport> reports =
      ApplyAll(record,
               "stepd 1 1\nstarted 0 10\nfailed n1: cannot open output "
               "file /x: Permission "
               "denied\nexit 0 0 9\ndone\n");
  ASSERT_EQ(reports.size(), 2U);
  EXPECT_EQ(std::get<LaunchFailedReport>(reports[0]).reason,
            "n1: cannot open output file /x: Permission denied");
  EXPECT_TRUE(std::holds_alternative<ReleasedReport>(reports[1]));
  EXPECT_FALSE(record.Running());
  EXPECT_EQ(record.LaunchError(), "n1: cannot open output file /x: Permission denied");
  EXPECT_FALSE(record.FirstFailure());
  EXPECT_EQ(record.RanksStarted(), 1);
}

TEST(LaunchRecordTest, NonsenseLinesChangeNothing) {
  LaunchRecord record;
  ApplyAll(record, "started 0 10\npgid 10\nexit 5 1 0\nexit 0 0 0\n");
  // A second exit of a rank, or an exit of a rank never started.
  EXPECT_EQ(ApplyAll(record, "exit 0 1 0\n").size(), 0U);
  EXPECT_EQ(record.RanksOk(), 1);
  EXPECT_FALSE(record.FirstFailure());
  ApplyAll(record, "done\n");
  EXPECT_EQ(ApplyAll(record, "started 9 99\npgid 99\ndone\n").size(), 0U);
  EXPECT_EQ(record.RanksStarted(), 1);
}

TEST(LaunchRecordTest, AnAbandonedRunningLaunchKillsWhatIsLeft) {
  LaunchRecord record;
  ApplyAll(record, "stepd 1 1\nstarted 0 10\nstarted 1 11\npgid 10\nexit 1 0 0\n");
  const std::vector<StepEvent> events = record.AbandonEvents("n1: stepd gone");
  std::string text;
  for (const StepEvent& event : events) text += FormatStepEvent(event);
  // Ranks were reported started: their end is an exit, not a launch failure.
  EXPECT_EQ(text, "exit 0 0 9 0 0\ndone\n");
  const std::vector<LaunchReport> reports = ApplyAll(record, text);
  ASSERT_EQ(reports.size(), 2U);
  EXPECT_EQ(std::get<RankExitedReport>(reports[0]).signal, SIGKILL);
  ASSERT_TRUE(record.FirstFailure());
  EXPECT_EQ(record.FirstFailure()->signal, SIGKILL);
}

TEST(LaunchRecordTest, AnAbandonedStartingLaunchFails) {
  LaunchRecord record;
  ApplyAll(record, "stepd 1 1\nstarted 0 10\n");
  EXPECT_EQ(record.ProcessGroup(), 10);
  std::string text;
  for (const StepEvent& event : record.AbandonEvents("n1: stepd gone")) {
    text += FormatStepEvent(event);
  }
  EXPECT_EQ(text, "failed n1: stepd gone\nexit 0 0 9 0 0\ndone\n");

  LaunchRecord empty;
  text.clear();
  for (const StepEvent& event : empty.AbandonEvents("n1: never started")) {
    text += FormatStepEvent(event);
  }
  EXPECT_EQ(text, "failed n1: never started\ndone\n");
  EXPECT_EQ(empty.ProcessGroup(), 0);

  ApplyAll(empty, text);
  EXPECT_TRUE(empty.AbandonEvents("again").empty());
}

TEST(LaunchRecordTest, AnImageIsReportedForTheMetricsAndChangesNothing) {
  LaunchRecord record;
  const std::optional<LaunchReport> report = record.Apply(ImageEvent{ImageOutcome::kCached, 0, 3});
  ASSERT_TRUE(report.has_value());
  ASSERT_TRUE(std::holds_alternative<ImageReport>(*report));
  EXPECT_EQ(std::get<ImageReport>(*report).image, (ImageEvent{ImageOutcome::kCached, 0, 3}));
  EXPECT_FALSE(record.Running());
  EXPECT_FALSE(record.Done());
  EXPECT_TRUE(record.LaunchError().empty());
}

}  // namespace
}  // namespace cohort::step
