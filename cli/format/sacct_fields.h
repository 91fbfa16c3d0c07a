// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"

/// sacct's --format fields that Cohort has, for a job's line and its steps'
/// lines (`12.batch`, `12.0`), and sacct's fixed-width table. No clock:
/// `now_ms` is a parameter (running jobs' Elapsed).
namespace cohort::cli {

struct AccountingField;

/// One column of a --format list: a field and its width (`State%20`).
struct AccountingColumn {
  const AccountingField* field = nullptr;
  int width = 0;
};

/// Reads a --format list such as `JobID,State,ExitCode%10` (field names in
/// any case, each optionally `%WIDTH`). InvalidArgument names an unknown
/// field and lists the known ones.
[[nodiscard]] absl::StatusOr<std::vector<AccountingColumn>> ParseAccountingFields(
    std::string_view list);

/// The field names of a column list, as sacct's header writes them (JobID).
[[nodiscard]] std::vector<std::string> AccountingHeader(
    const std::vector<AccountingColumn>& columns);
/// A job's cells (`step` null) or one of its steps' cells. Fields a step
/// does not have are empty, as in sacct.
[[nodiscard]] std::vector<std::string> AccountingRow(const std::vector<AccountingColumn>& columns,
                                                     const v1::Job& job, const v1::JobStep* step,
                                                     std::int64_t now_ms);

/// The rows of one of a job's past attempts (sacct --duplicates): its job
/// line as the attempt ended, its State NODE_FAIL, PREEMPTED or REQUEUED,
/// then its steps' lines unless `job_only`.
[[nodiscard]] std::vector<std::vector<std::string>> PastAttemptRows(
    const std::vector<AccountingColumn>& columns, const v1::Job& job, const v1::JobAttempt& attempt,
    std::int64_t now_ms, bool job_only);

/// Whether the first of PrintAccountingTable's rows is the header.
enum class TableHeader { kWith, kWithout };
/// Prints rows as sacct's table: each cell cut or padded to its column's
/// width (right-aligned, JobID and names left), a line of dashes under the
/// header when `rows` starts with one.
void PrintAccountingTable(const std::vector<AccountingColumn>& columns,
                          const std::vector<std::vector<std::string>>& rows, TableHeader header,
                          std::ostream& out);

/// The CPUs a job holds, as AllocCPUS shows them: its nodes × tasks per
/// node × CPUs per task.
[[nodiscard]] int AllocCpus(const v1::Job& job);

/// Every field name, as --helpformat lists them.
[[nodiscard]] std::vector<std::string_view> AccountingFieldNames();

}  // namespace cohort::cli
