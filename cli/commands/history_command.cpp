// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "format/history_format.h"
#include "format/job_format.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

enum class HistoryOutput { kTable, kParsable, kParsable2, kJson };

struct HistoryOptions {
  ConnectionOptions connection;
  HistoryFilters filters;
  bool parsable = false;
  bool parsable2 = false;
  bool json = false;
  bool no_header = false;
  bool allocations = false;  ///< -X: no step lines
};

void PrintHistory(const std::vector<v1::Job>& jobs, HistoryOutput output, bool header,
                  bool with_steps) {
  if (output == HistoryOutput::kJson) {
    nlohmann::ordered_json out;
    out["jobs"] = nlohmann::ordered_json::array();
    for (const v1::Job& job : jobs) {
      nlohmann::ordered_json entry = JobToJson(job, job.end_time_ms());
      entry["gpu_hours"] = job.gpu_hours();
      out["jobs"].push_back(std::move(entry));
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::vector<std::vector<std::string>> rows;
  if (header) rows.push_back(HistoryHeader());
  for (const v1::Job& job : jobs) {
    rows.push_back(HistoryRow(job));
    if (!with_steps) continue;
    for (const v1::JobStep& step : job.steps()) rows.push_back(HistoryStepRow(job, step));
  }
  switch (output) {
    case HistoryOutput::kParsable:
      PrintParsable(rows, ParsableEnd::kTrailingBar, std::cout);
      break;
    case HistoryOutput::kParsable2:
      PrintParsable(rows, ParsableEnd::kNoTrailingBar, std::cout);
      break;
    default:
      PrintColumns(rows, std::cout);
      break;
  }
}

int History(const HistoryOptions& o) {
  // Every option is read before connecting: a typo is refused at once, with
  // what the option takes, even when no controller is around.
  absl::StatusOr<v1::JobHistoryRequest> request = MakeHistoryRequest(o.filters, NowMs());
  if (!request.ok()) {
    std::cerr << fmt::format("cohort: {}\n", request.status().message());
    return 2;
  }
  HistoryOutput output = HistoryOutput::kTable;
  if (o.json) output = HistoryOutput::kJson;
  if (o.parsable) output = HistoryOutput::kParsable;
  if (o.parsable2) output = HistoryOutput::kParsable2;
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::JobHistoryResponse> response = client.JobHistory(*request);
    if (!response.ok()) return response.status();
    const std::vector<v1::Job> jobs(response->jobs().begin(), response->jobs().end());
    PrintHistory(jobs, output, !o.no_header, !o.allocations);
    return absl::OkStatus();
  });
}

}  // namespace

void AddHistoryCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<HistoryOptions>();
  HistoryFilters& f = o->filters;
  CLI::App* history = app.add_subcommand(
      "history", "list finished jobs from the controller's records, oldest end first (like sacct)");
  history->add_option("-u,--user", f.user, "only this user's jobs (one login name)")
      ->type_name("NAME");
  history->add_flag("-a,--all-users", f.all_users,
                    "every user's jobs (default: only yours, unless --user or --jobs is given; "
                    "root sees everyone's)");
  history->add_option("-A,--account", f.account, "only jobs of this account")->type_name("NAME");
  history
      ->add_option("-s,--state", f.states,
                   "only jobs that ended in these states, comma separated, by name or code in "
                   "any case: COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), "
                   "NODE_FAIL (NF)")
      ->type_name("LIST");
  history
      ->add_option("-S,--since,--starttime", f.since,
                   "only jobs that ended at or after TIME: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] "
                   "(local time), today, now, now-N[seconds|minutes|hours|days|weeks]")
      ->type_name("TIME");
  history
      ->add_option("-E,--until,--endtime", f.until,
                   "only jobs that ended before TIME (same forms as --since)")
      ->type_name("TIME");
  history->add_option("-j,--jobs", f.jobs, "only these jobs (of any user you may see)")
      ->type_name("ID[,ID...]");
  history
      ->add_option("--limit", f.limit,
                   "at most N jobs: the N that ended first among the matches (0: no limit)")
      ->type_name("N");
  CLI::Option* parsable =
      history->add_flag("-p,--parsable", o->parsable,
                        "fields separated by |, with a | ending each line (as sacct -p)");
  CLI::Option* parsable2 =
      history->add_flag("-P,--parsable2", o->parsable2,
                        "fields separated by |, without a | at the end (as sacct -P)");
  CLI::Option* json = history->add_flag("--json", o->json, "print {\"jobs\": [...]} as JSON");
  parsable->excludes(parsable2)->excludes(json);
  parsable2->excludes(json);
  history->add_flag("-n,--noheader", o->no_header, "leave out the header line");
  history->add_flag("-X,--allocations", o->allocations,
                    "one line a job, without its steps' lines (ID.batch, ID.0, ...), as sacct -X");
  AddConnectionOptions(*history, o->connection);
  history->callback([o, &exit_code] { exit_code = History(*o); });
}

}  // namespace cohort::cli
