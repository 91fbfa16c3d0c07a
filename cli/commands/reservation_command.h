// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"
#include "transport/controller_client.h"

/// Operators' reservations in scontrol's and sinfo's words.
namespace cohort::cli {

/// scontrol's KEY=VALUE words of `create`, `update` or `delete` (verb) as a
/// request: ReservationName, StartTime and EndTime (sbatch --begin's
/// forms), Duration (--time's), Nodes (a hostlist, or ALL), NodeCnt, Users,
/// Accounts, PartitionName, Flags. InvalidArgument names a bad word.
[[nodiscard]] absl::StatusOr<v1::UpdateReservationRequest> ParseReservationWords(
    std::string_view verb, const std::vector<std::string>& words, std::int64_t now_ms);

/// One reservation as `scontrol show reservation` prints it.
[[nodiscard]] std::string ReservationRecordText(const v1::Reservation& r);
/// sinfo -T's table, its header first.
[[nodiscard]] std::vector<std::vector<std::string>> ReservationRows(
    const v1::ListReservationsResponse& list);

/// Sends a create, update or delete; prints what Slurm prints. Exit status.
int RunReservationChange(const ConnectionOptions& connection, std::string_view verb,
                         const std::vector<std::string>& words);
/// scontrol show reservation [NAME]. Exit status.
int ShowReservations(const ConnectionOptions& connection, const std::string& name);

/// scontrol's `create` and `delete` subcommands.
void AddReservationCommands(CLI::App& scontrol, int& exit_code);

}  // namespace cohort::cli
