// SPDX-License-Identifier: Apache-2.0
#include "commands/reservation_command.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test_support.h"

namespace cohort::cli {
namespace {

// 2024-05-01T13:45:00 UTC.
constexpr std::int64_t kResvNowMs = 1714571100000;

// Times are local; the tests read them in UTC.
class ReservationCommandTest : public cohort::testing::UtcTest {};

TEST_F(ReservationCommandTest, ScontrolWordsBecomeARequest) {
  const absl::StatusOr<v1::UpdateReservationRequest> request = ParseReservationWords(
      "create",
      {"reservation", "ReservationName=maint", "StartTime=now+1hour", "Duration=2:00:00",
       "Nodes=node[01-04]", "Users=root,alice", "Flags=MAINT,DAILY"},
      kResvNowMs);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->verb(), "create");
  EXPECT_EQ(request->name(), "maint");
  EXPECT_EQ(request->start_ms(), kResvNowMs + 3600 * 1000);
  EXPECT_EQ(request->duration_s(), 7200);
  EXPECT_EQ(request->nodes(), "node[01-04]");
  EXPECT_EQ(request->users(), "root,alice");
  EXPECT_EQ(request->flags(), "MAINT,DAILY");
  EXPECT_FALSE(request->has_end_ms());
  EXPECT_FALSE(request->has_node_count()) << "only what was given is set";
}

TEST_F(ReservationCommandTest, BadWordsAreRefusedByName) {
  EXPECT_EQ(ParseReservationWords("create", {"StartTime=now", "Duration=10"}, kResvNowMs)
                .status()
                .message(),
            "name the reservation: ReservationName=maint StartTime=now+1hour Duration=2:00:00 "
            "Nodes=ALL Users=root Flags=MAINT");
  EXPECT_NE(ParseReservationWords("create", {"ReservationName=m", "Duration=soon"}, kResvNowMs)
                .status()
                .message()
                .find("Duration=soon: give a length"),
            std::string::npos);
  EXPECT_NE(ParseReservationWords("create", {"ReservationName=m", "NodeCnt=0"}, kResvNowMs)
                .status()
                .message()
                .find("NodeCnt=0"),
            std::string::npos);
  EXPECT_NE(ParseReservationWords("create", {"ReservationName=m", "Licenses=x:1"}, kResvNowMs)
                .status()
                .message()
                .find("Licenses: a reservation takes"),
            std::string::npos);
  EXPECT_FALSE(ParseReservationWords("create", {"ReservationName=m", "loose"}, kResvNowMs).ok());
}

TEST_F(ReservationCommandTest, ShowAndSinfoLinesAreSlurms) {
  v1::Reservation r;
  r.set_name("maint");
  r.set_start_ms(kResvNowMs);
  r.set_end_ms(kResvNowMs + 2 * 3600 * 1000);
  r.set_nodes("node[01-04]");
  r.set_node_count(4);
  r.add_users("root");
  r.set_flags("MAINT");
  r.set_user("root");
  r.set_active(true);
  EXPECT_EQ(ReservationRecordText(r),
            "ReservationName=maint StartTime=2024-05-01T13:45:00 EndTime=2024-05-01T15:45:00 "
            "Duration=02:00:00\n"
            "   Nodes=node[01-04] NodeCnt=4 PartitionName=(null) Flags=MAINT\n"
            "   Users=root Accounts=(null) State=ACTIVE CreatedBy=root\n");
  v1::ListReservationsResponse list;
  *list.add_reservations() = r;
  const std::vector<std::vector<std::string>> rows = ReservationRows(list);
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[1], (std::vector<std::string>{"maint", "ACTIVE", "2024-05-01T13:45:00",
                                               "2024-05-01T15:45:00", "02:00:00", "node[01-04]"}));
}

}  // namespace
}  // namespace cohort::cli
