// SPDX-License-Identifier: Apache-2.0
// Operators' reservations as Slurm's commands have them: scontrol
// create|update|delete|show reservation, sinfo -T.
#include "commands/reservation_command.h"

#include <charconv>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"
#include "format/history_format.h"
#include "format/job_format.h"
#include "transport/controller_client.h"

namespace cohort::cli {
// Its own namespace: unity builds compile this file with other commands'.
namespace reservation_cli {
namespace {

constexpr std::string_view kExample =
    "ReservationName=maint StartTime=now+1hour Duration=2:00:00 Nodes=ALL Users=root "
    "Flags=MAINT";

std::string Duration(std::int64_t ms) { return FormatSlurmTime(std::chrono::seconds(ms / 1000)); }

std::string OrNull(const std::string& text) { return text.empty() ? "(null)" : text; }

std::string Joined(const google::protobuf::RepeatedPtrField<std::string>& names) {
  return names.empty() ? "(null)" : fmt::format("{}", fmt::join(names, ","));
}

}  // namespace
}  // namespace reservation_cli

using reservation_cli::Duration;
using reservation_cli::Joined;
using reservation_cli::kExample;
using reservation_cli::OrNull;

absl::StatusOr<v1::UpdateReservationRequest> ParseReservationWords(
    std::string_view verb, const std::vector<std::string>& words, std::int64_t now_ms) {
  v1::UpdateReservationRequest request;
  request.set_verb(std::string(verb));
  for (const std::string& word : words) {
    if (EqualsIgnoreCase(word, "reservation") || EqualsIgnoreCase(word, "res")) continue;
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("\"{}\": give KEY=VALUE words, as {}", word, kExample));
    }
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    if (EqualsIgnoreCase(key, "ReservationName") || EqualsIgnoreCase(key, "Reservation")) {
      request.set_name(value);
    } else if (EqualsIgnoreCase(key, "StartTime")) {
      absl::StatusOr<std::int64_t> at = ParseFutureTime(value, "StartTime", now_ms);
      if (!at.ok()) return at.status();
      request.set_start_ms(*at);
    } else if (EqualsIgnoreCase(key, "EndTime")) {
      absl::StatusOr<std::int64_t> at = ParseFutureTime(value, "EndTime", now_ms);
      if (!at.ok()) return at.status();
      request.set_end_ms(*at);
    } else if (EqualsIgnoreCase(key, "Duration")) {
      absl::StatusOr<std::chrono::seconds> length = ParseSlurmTime(value);
      if (!length.ok() || *length == kUnlimited || length->count() <= 0) {
        return absl::InvalidArgumentError(fmt::format(
            "Duration={}: give a length as --time takes it (120 is minutes, 2:00:00, 1-0)", value));
      }
      request.set_duration_s(length->count());
    } else if (EqualsIgnoreCase(key, "Nodes") || EqualsIgnoreCase(key, "NodeList")) {
      request.set_nodes(value);
    } else if (EqualsIgnoreCase(key, "NodeCnt") || EqualsIgnoreCase(key, "NodeCount")) {
      int count = 0;
      const auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), count);
      if (value.empty() || error != std::errc() || ptr != value.data() + value.size() ||
          count < 1 || count > 1'000'000) {
        return absl::InvalidArgumentError(
            fmt::format("NodeCnt={}: give a node count of 1 or more", value));
      }
      request.set_node_count(count);
    } else if (EqualsIgnoreCase(key, "Switches")) {
      int count = 0;
      const auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), count);
      if (value.empty() || error != std::errc() || ptr != value.data() + value.size() ||
          count < 0 || count > 1'000'000) {
        return absl::InvalidArgumentError(fmt::format(
            "Switches={}: give the most leaf switches the nodes may span (1 or more; 0 clears)",
            value));
      }
      request.set_switches(count);
    } else if (EqualsIgnoreCase(key, "Users")) {
      request.set_users(value);
    } else if (EqualsIgnoreCase(key, "Accounts")) {
      request.set_accounts(value);
    } else if (EqualsIgnoreCase(key, "PartitionName") || EqualsIgnoreCase(key, "Partition")) {
      request.set_partition(value);
    } else if (EqualsIgnoreCase(key, "Flags")) {
      request.set_flags(value);
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "{}: a reservation takes ReservationName, StartTime, EndTime, Duration, Nodes, NodeCnt, "
          "Switches, Users, Accounts, PartitionName and Flags",
          key));
    }
  }
  if (request.name().empty()) {
    return absl::InvalidArgumentError(fmt::format("name the reservation: {}", kExample));
  }
  return request;
}

std::string ReservationRecordText(const v1::Reservation& r) {
  return fmt::format(
      "ReservationName={} StartTime={} EndTime={} Duration={}\n"
      "   Nodes={} NodeCnt={} PartitionName={} Flags={}{}\n"
      "   Users={} Accounts={} State={} CreatedBy={}\n",
      r.name(), FormatTimestamp(r.start_ms()), FormatTimestamp(r.end_ms()),
      Duration(r.end_ms() - r.start_ms()), r.nodes(), r.node_count(), OrNull(r.partition()),
      OrNull(r.flags()),
      r.by_count() ? fmt::format(" Placement=ALLOCATOR Switches={}",
                                 r.switches() > 0 ? std::to_string(r.switches()) : "(null)")
                   : std::string(),
      Joined(r.users()), Joined(r.accounts()), r.active() ? "ACTIVE" : "INACTIVE",
      r.user().empty() ? std::to_string(r.uid()) : r.user());
}

std::vector<std::vector<std::string>> ReservationRows(const v1::ListReservationsResponse& list) {
  std::vector<std::vector<std::string>> rows{
      {"RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST"}};
  for (const v1::Reservation& r : list.reservations()) {
    rows.push_back({r.name(), r.active() ? "ACTIVE" : "INACTIVE", FormatTimestamp(r.start_ms()),
                    FormatTimestamp(r.end_ms()), Duration(r.end_ms() - r.start_ms()), r.nodes()});
  }
  return rows;
}

int RunReservationChange(const ConnectionOptions& connection, std::string_view verb,
                         const std::vector<std::string>& words) {
  absl::StatusOr<v1::UpdateReservationRequest> request =
      ParseReservationWords(verb, words, NowMs());
  if (!request.ok()) {
    std::cerr << fmt::format("scontrol: error: {}\n", request.status().message());
    return 1;
  }
  const int status = CallController(connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::UpdateReservationResponse> done = client.UpdateReservation(*request);
    if (!done.ok()) return done.status();
    if (verb == "create") std::cout << fmt::format("Reservation created: {}\n", request->name());
    return absl::OkStatus();
  });
  return status == 0 ? 0 : 1;
}

int ShowReservations(const ConnectionOptions& connection, const std::string& name) {
  const int status = CallController(connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListReservationsResponse> list =
        client.ListReservations(v1::ListReservationsRequest{});
    if (!list.ok()) return list.status();
    bool any = false;
    for (const v1::Reservation& r : list->reservations()) {
      if (!name.empty() && r.name() != name) continue;
      if (any) std::cout << '\n';
      std::cout << ReservationRecordText(r);
      any = true;
    }
    if (!any && !name.empty()) {
      return absl::NotFoundError(fmt::format("Reservation {} not found", name));
    }
    if (!any) std::cout << "No reservations in the system\n";
    return absl::OkStatus();
  });
  return status == 0 ? 0 : 1;
}

void AddReservationCommands(CLI::App& scontrol, int& exit_code) {
  struct Words {
    ConnectionOptions connection;
    std::vector<std::string> words;
  };
  for (const auto& [verb, help] :
       {std::pair{"create", "make a reservation: scontrol create reservation KEY=VALUE ..."},
        std::pair{"delete", "delete a reservation: scontrol delete ReservationName=NAME"}}) {
    auto o = std::make_shared<Words>();
    CLI::App* command = scontrol.add_subcommand(verb, help);
    command->add_option("KEY=VALUE", o->words, std::string(kExample))->required();
    AddConnectionOptions(*command, o->connection, ConfigShortName::kNone);
    const std::string_view v = verb;
    command->callback(
        [o, v, &exit_code] { exit_code = RunReservationChange(o->connection, v, o->words); });
  }
}

}  // namespace cohort::cli
