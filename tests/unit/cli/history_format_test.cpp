// SPDX-License-Identifier: Apache-2.0
#include "format/history_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "format/job_format.h"
#include "test_support.h"

namespace cohort::cli {
namespace {

// 2024-05-01T13:45:00 UTC.
constexpr std::int64_t kNowMs = 1714571100000;

// Times without a zone are local; the tests read them in UTC.
class HistoryFormatTest : public cohort::testing::UtcTest {
 protected:
  static std::int64_t MustParseTime(std::string_view text) {
    const absl::StatusOr<std::int64_t> ms = ParseHistoryTime(text, "--since", kNowMs);
    EXPECT_TRUE(ms.ok()) << text << ": " << ms.status();
    return ms.ok() ? *ms : -1;
  }

  static std::string TimeError(std::string_view text) {
    const absl::StatusOr<std::int64_t> ms = ParseHistoryTime(text, "--until", kNowMs);
    EXPECT_FALSE(ms.ok()) << text << " gave " << *ms;
    EXPECT_EQ(ms.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(ms.status().message());
  }
};

TEST_F(HistoryFormatTest, BeginTimesAreTheNextSuchTime) {
  constexpr std::int64_t kHour = 3600 * 1000;
  constexpr std::int64_t kMidnight = kNowMs - (13 * kHour + 45 * 60 * 1000);  // 2024-05-01 00:00
  const auto at = [](std::string_view text) {
    const absl::StatusOr<std::int64_t> ms = ParseFutureTime(text, "--begin", kNowMs);
    EXPECT_TRUE(ms.ok()) << text << ": " << ms.status();
    return ms.value_or(-1);
  };
  EXPECT_EQ(at("now"), kNowMs);
  EXPECT_EQ(at("now+1hour"), kNowMs + kHour);
  EXPECT_EQ(at("16:00"), kMidnight + 16 * kHour);                              // later today
  EXPECT_EQ(at("9:30"), kMidnight + 24 * kHour + 9 * kHour + 30 * 60 * 1000);  // tomorrow's
  EXPECT_EQ(at("midnight"), kMidnight + 24 * kHour);  // the next, as Slurm's
  EXPECT_EQ(at("noon"), kMidnight + 36 * kHour);      // 12:00 has passed today
  EXPECT_EQ(at("teatime"), kMidnight + 16 * kHour);
  EXPECT_EQ(at("tomorrow"), kMidnight + 24 * kHour);
  EXPECT_EQ(at("2024-06-01"), 1717200000000);
  // A time of day on a day, as Slurm reads them.
  EXPECT_EQ(at("noon-tomorrow"), kMidnight + 36 * kHour);
  EXPECT_EQ(at("noon-today"), kMidnight + 12 * kHour) << "today's, though past";
  EXPECT_EQ(at("16:30-tomorrow"), kMidnight + 40 * kHour + 30 * 60 * 1000);
  EXPECT_EQ(at("fika"), kMidnight + 15 * kHour);
  EXPECT_EQ(at("elevenses-tomorrow"), kMidnight + 35 * kHour);
  EXPECT_FALSE(ParseFutureTime("tomorrow-tomorrow", "--begin", kNowMs).ok());
  const absl::StatusOr<std::int64_t> past = ParseFutureTime("now-1hour", "--begin", kNowMs);
  EXPECT_EQ(past.status().message(),
            "--begin: now-1hour is in the past; write HH:MM[:SS] (the next such time of day), "
            "YYYY-MM-DD[THH:MM[:SS]] (local time), now+N[seconds|minutes|hours|days|weeks] (such "
            "as now+1hour), today, tomorrow, midnight, noon, elevenses, fika or teatime, and a "
            "time of day with -today or -tomorrow (noon-tomorrow)");
  EXPECT_FALSE(ParseFutureTime("25:00", "--begin", kNowMs).ok());
  EXPECT_FALSE(ParseFutureTime("soon", "--deadline", kNowMs).ok());
}

TEST_F(HistoryFormatTest, ReadsSacctTimeForms) {
  EXPECT_EQ(MustParseTime("2024-05-01"), 1714521600000);
  EXPECT_EQ(MustParseTime("2024-05-01T13:45"), kNowMs);
  EXPECT_EQ(MustParseTime("2024-05-01T13:45:07"), kNowMs + 7000);
  EXPECT_EQ(MustParseTime("2024-5-1T9:05"), 1714554300000);
  EXPECT_EQ(MustParseTime("now"), kNowMs);
  EXPECT_EQ(MustParseTime("NOW"), kNowMs);
  EXPECT_EQ(MustParseTime("now-30"), kNowMs - 30'000);
  EXPECT_EQ(MustParseTime("now-2hours"), kNowMs - 2 * 3'600'000);
  EXPECT_EQ(MustParseTime("now-1hour"), kNowMs - 3'600'000);
  EXPECT_EQ(MustParseTime("now-3days"), kNowMs - 3 * 86'400'000);
  EXPECT_EQ(MustParseTime("now-15minutes"), kNowMs - 15 * 60'000);
  EXPECT_EQ(MustParseTime("now-15min"), kNowMs - 15 * 60'000);
  EXPECT_EQ(MustParseTime("now-1weeks"), kNowMs - 7 * 86'400'000);
  EXPECT_EQ(MustParseTime("now+1d"), kNowMs + 86'400'000);
  EXPECT_EQ(MustParseTime("today"), 1714521600000);
  EXPECT_EQ(MustParseTime("midnight"), 1714521600000);
}

TEST_F(HistoryFormatTest, ParsedTimesPrintAsTyped) {
  for (const std::string_view text : {"2024-02-29T23:59:59", "1999-12-31T00:00:01"}) {
    EXPECT_EQ(FormatTimestamp(MustParseTime(text)), text);
  }
}

TEST_F(HistoryFormatTest, RefusesOtherTimesNamingTheOptionAndTheForms) {
  for (const std::string_view text :
       {"", "yesterday", "2024-05", "2024-05-01T", "2024-05-01T13", "2024-05-01 13:45",
        "2024-05-01T13:45:", "2024-05-01T13:45:07Z", "24-05-01", "now-", "now-2years", "now-x",
        "now2hours", "now-2 hours", "nowhere"}) {
    const std::string message = TimeError(text);
    EXPECT_NE(message.find("--until: cannot read"), std::string::npos) << message;
    EXPECT_NE(message.find("YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS]"), std::string::npos) << message;
    EXPECT_NE(message.find("now-N[seconds|minutes|hours|days|weeks]"), std::string::npos)
        << message;
  }
  EXPECT_NE(TimeError("2023-02-29").find("no such date"), std::string::npos);
  EXPECT_NE(TimeError("2024-13-01").find("no such date"), std::string::npos);
  EXPECT_NE(TimeError("2024-05-01T24:00").find("no such date"), std::string::npos);
  EXPECT_NE(TimeError("2024-05-01T12:60").find("no such date"), std::string::npos);
  EXPECT_NE(TimeError("1960-01-01").find("before 1970"), std::string::npos);
  EXPECT_NE(TimeError("now-3000weeks").find("before 1970"), std::string::npos);
}

TEST(HistoryStatesTest, ReadsFinishedStatesByNameOrCodeInAnyCase) {
  const absl::StatusOr<std::vector<v1::JobState>> states =
      ParseHistoryStates("cd,F,Cancelled,to,NODE_FAIL,CD,canceled");
  ASSERT_TRUE(states.ok()) << states.status();
  EXPECT_EQ(*states,
            (std::vector<v1::JobState>{v1::JOB_COMPLETED, v1::JOB_FAILED, v1::JOB_CANCELLED,
                                       v1::JOB_TIMEOUT, v1::JOB_NODE_FAIL}));
}

TEST(HistoryStatesTest, RefusesUnknownAndUnfinishedStatesListingTheValidOnes) {
  for (const std::string_view text : {"done", "CD,XX", "R", "pending", ",", ""}) {
    const absl::StatusOr<std::vector<v1::JobState>> states = ParseHistoryStates(text);
    ASSERT_FALSE(states.ok()) << text;
    EXPECT_EQ(states.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        states.status().message().find(
            "states: COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF)"),
        std::string::npos)
        << states.status();
  }
  EXPECT_NE(ParseHistoryStates("CD,XX").status().message().find("no state \"XX\""),
            std::string::npos);
  EXPECT_NE(ParseHistoryStates("R").status().message().find("RUNNING jobs are not in the history"),
            std::string::npos);
}

TEST(HistoryJobIdsTest, ReadsACommaList) {
  const absl::StatusOr<std::vector<std::int64_t>> ids = ParseJobIds("12,15,,3");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<std::int64_t>{12, 15, 3}));
  for (const std::string_view text : {"0", "-1", "12.0", "x", "12,y", ","}) {
    EXPECT_EQ(ParseJobIds(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST_F(HistoryFormatTest, MakesTheRequest) {
  HistoryFilters filters;
  filters.user = "alice";
  filters.account = "physics";
  filters.states = "F,TO";
  filters.since = "2024-05-01";
  filters.until = "now";
  filters.jobs = "7,9";
  filters.limit = 20;
  const absl::StatusOr<v1::JobHistoryRequest> request = MakeHistoryRequest(filters, kNowMs);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->user_name(), "alice");
  EXPECT_FALSE(request->all_users());
  EXPECT_EQ(request->account(), "physics");
  ASSERT_EQ(request->states_size(), 2);
  EXPECT_EQ(request->states(0), v1::JOB_FAILED);
  EXPECT_EQ(request->states(1), v1::JOB_TIMEOUT);
  EXPECT_EQ(request->since_ms(), 1714521600000);
  EXPECT_EQ(request->until_ms(), kNowMs);
  ASSERT_EQ(request->job_ids_size(), 2);
  EXPECT_EQ(request->job_ids(1), 9);
  EXPECT_EQ(request->limit(), 20);

  const absl::StatusOr<v1::JobHistoryRequest> empty = MakeHistoryRequest({}, kNowMs);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->since_ms(), 0);
  EXPECT_EQ(empty->until_ms(), 0);
  EXPECT_EQ(empty->states_size(), 0);
}

TEST_F(HistoryFormatTest, RefusesContradictoryFilters) {
  HistoryFilters window;
  window.since = "now";
  window.until = "now-1hour";
  const absl::Status backwards = MakeHistoryRequest(window, kNowMs).status();
  EXPECT_EQ(backwards.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(backwards.message().find("--since now is not before --until now-1hour"),
            std::string::npos)
      << backwards;

  HistoryFilters users;
  users.user = "alice,bob";
  EXPECT_NE(MakeHistoryRequest(users, kNowMs).status().message().find("--user: one login name"),
            std::string::npos);

  HistoryFilters limit;
  limit.limit = -1;
  EXPECT_NE(MakeHistoryRequest(limit, kNowMs).status().message().find("--limit"),
            std::string::npos);

  HistoryFilters since;
  since.since = "yesterday";
  EXPECT_NE(MakeHistoryRequest(since, kNowMs).status().message().find("--since: cannot read"),
            std::string::npos);
}

v1::Job FinishedJob() {
  v1::Job job;
  job.set_id(42);
  job.mutable_spec()->set_name("train");
  job.mutable_spec()->set_user_name("alice");
  job.mutable_spec()->set_account("physics");
  job.mutable_spec()->set_partition("gpu");
  job.mutable_spec()->set_nodes(2);
  job.set_nodes("node[01-02]");
  job.set_submit_time_ms(kNowMs - 3'600'000);
  job.set_start_time_ms(kNowMs - 3'000'000);
  job.set_end_time_ms(kNowMs + 90'061'000);  // 1-01:51:01 after the start
  job.set_state(v1::JOB_FAILED);
  job.set_exit_code(0);
  job.set_exit_signal(9);
  job.set_gpu_hours(25.126);
  return job;
}

TEST_F(HistoryFormatTest, RowsAreSacctColumns) {
  EXPECT_EQ(
      HistoryRow(FinishedJob()),
      (std::vector<std::string>{"42", "train", "alice", "physics", "gpu", "2", "node[01-02]",
                                "2024-05-01T12:45:00", "2024-05-01T12:55:00", "2024-05-02T14:46:01",
                                "1-01:51:01", "FAILED", "0:9", "25.13", "", ""}));
  v1::Job never_ran = FinishedJob();
  never_ran.clear_nodes();
  never_ran.set_start_time_ms(0);
  never_ran.set_state(v1::JOB_CANCELLED);
  never_ran.set_exit_signal(0);
  never_ran.set_gpu_hours(0);
  const std::vector<std::string> row = HistoryRow(never_ran);
  EXPECT_EQ(row[6], "None assigned");
  EXPECT_EQ(row[8], "none");
  EXPECT_EQ(row[10], "00:00:00");
  EXPECT_EQ(row[12], "0:0");
  EXPECT_EQ(row[13], "0.00");
  EXPECT_EQ(HistoryHeader().size(), row.size());
}

TEST_F(HistoryFormatTest, StepRowsAreSacctStepLines) {
  v1::Job job = FinishedJob();
  v1::JobStep& step = *job.add_steps();
  step.set_step_id(0);
  step.set_name("0");
  step.set_state("FAILED");
  step.set_nodes("node[01-02]");
  step.set_exit_code(3);
  step.set_start_time_ms(job.start_time_ms());
  step.set_end_time_ms(job.start_time_ms() + 61'000);
  step.set_max_rss_kb(2048);
  step.set_total_cpu_ms(61'250);
  const std::vector<std::string> row = HistoryStepRow(job, step);
  EXPECT_EQ(row, (std::vector<std::string>{"42.0", "train", "", "physics", "", "2", "node[01-02]",
                                           "", "2024-05-01T12:55:00", "2024-05-01T12:56:01",
                                           "00:01:01", "FAILED", "3:0", "", "2048K", "01:01.250"}));
  EXPECT_EQ(HistoryHeader().size(), row.size());
}

TEST(ParsableTest, JoinsCellsWithBarsWithoutPadding) {
  const std::vector<std::vector<std::string>> rows = {
      {"JOBID", "NAME", "STATE"}, {"7", "a long name", "COMPLETED"}, {"8", "", "FAILED"}};
  std::ostringstream trailing;
  PrintParsable(rows, ParsableEnd::kTrailingBar, trailing);
  EXPECT_EQ(trailing.str(), "JOBID|NAME|STATE|\n7|a long name|COMPLETED|\n8||FAILED|\n");
  std::ostringstream bare;
  PrintParsable(rows, ParsableEnd::kNoTrailingBar, bare);
  EXPECT_EQ(bare.str(), "JOBID|NAME|STATE\n7|a long name|COMPLETED\n8||FAILED\n");
  std::ostringstream none;
  PrintParsable({}, ParsableEnd::kTrailingBar, none);
  EXPECT_EQ(none.str(), "");
}

}  // namespace
}  // namespace cohort::cli
