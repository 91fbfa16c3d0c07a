// SPDX-License-Identifier: Apache-2.0
// `sacct`: finished jobs from the controller's records and the jobs still
// pending or running, as Slurm's sacct lists them.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/slurm_commands.h"
#include "format/history_format.h"
#include "format/job_format.h"
#include "format/sacct_fields.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

constexpr std::string_view kDefaultFields =
    "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
constexpr std::string_view kBriefFields = "JobID,State,ExitCode";
constexpr std::string_view kLongFields =
    "JobID,JobIDRaw,JobName,Partition,MaxRSS,AllocCPUS,Elapsed,TotalCPU,State,ExitCode,NNodes,"
    "NodeList,Submit,Start,End,Timelimit,AllocTRES";

struct SacctOptions {
  ConnectionOptions connection;
  HistoryFilters filters;
  std::vector<std::string> jobs;  ///< -j, each a comma list; repeatable
  std::string format;
  std::string names;  ///< --name: a comma list
  bool brief = false;
  bool long_listing = false;
  bool parsable = false;
  bool parsable2 = false;
  bool no_header = false;
  bool allocations = false;
  bool duplicates = false;
};

// -s: the finished states go to the history request; every state given
// filters the live jobs. Empty: every state of both.
struct StateFilter {
  std::string finished;  ///< for HistoryFilters::states
  std::set<int> wanted;  ///< every JobState value given
  bool any = true;
};

absl::StatusOr<StateFilter> SplitStates(const std::string& text) {
  StateFilter filter;
  if (text.empty()) return filter;
  filter.any = false;
  for (const std::string_view word : CommaList(text)) {
    const std::optional<v1::JobState> state = ParseJobState(word);
    if (!state) {
      return absl::InvalidArgumentError(fmt::format(
          "--state: no state \"{}\"; states: PENDING (PD), RUNNING (R), COMPLETING (CG), "
          "COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF)",
          word));
    }
    filter.wanted.insert(*state);
    if (IsFinished(*state)) {
      filter.finished += fmt::format("{}{}", filter.finished.empty() ? "" : ",", word);
    }
  }
  return filter;
}

bool NameWanted(const std::string& names, const v1::Job& job) {
  const std::vector<std::string_view> wanted = CommaList(names);
  return wanted.empty() || std::ranges::find(wanted, job.spec().name()) != wanted.end();
}

int Sacct(SacctOptions o) {
  std::string fields = o.format;
  if (fields.empty()) {
    fields = o.brief ? kBriefFields : o.long_listing ? kLongFields : kDefaultFields;
  }
  absl::StatusOr<std::vector<AccountingColumn>> columns = ParseAccountingFields(fields);
  if (!columns.ok()) {
    std::cerr << fmt::format("sacct: error: {}\n", columns.status().message());
    return 1;
  }
  for (const std::string& list : o.jobs) {
    o.filters.jobs += (o.filters.jobs.empty() ? "" : ",") + list;
  }
  // As sacct: without -j or -S, the jobs since midnight.
  if (o.filters.jobs.empty() && o.filters.since.empty()) o.filters.since = "midnight";
  absl::StatusOr<StateFilter> states = SplitStates(o.filters.states);
  if (!states.ok()) {
    std::cerr << fmt::format("sacct: error: {}\n", states.status().message());
    return 1;
  }
  o.filters.states = states->finished;
  const std::int64_t now = NowMs();
  absl::StatusOr<v1::JobHistoryRequest> history = MakeHistoryRequest(o.filters, now);
  if (!history.ok()) {
    std::cerr << fmt::format("sacct: error: {}\n", history.status().message());
    return 1;
  }
  const bool want_finished = states->any || !states->finished.empty();
  const std::set<std::int64_t> ids(history->job_ids().begin(), history->job_ids().end());

  return SlurmStatus(CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    std::map<std::int64_t, v1::Job> jobs;  // by id: sacct lists in order of id
    {  // live jobs; a job that just ended may not be in the records yet
      v1::ListJobsRequest live;
      live.set_all_users(history->all_users() || !ids.empty() || !history->user_name().empty());
      live.set_user_name(history->user_name());
      // Jobs that just ended are still listed live until their record is
      // read back from the history below, which then replaces them.
      for (const v1::JobState s :
           {v1::JOB_PENDING, v1::JOB_RUNNING, v1::JOB_COMPLETING, v1::JOB_COMPLETED, v1::JOB_FAILED,
            v1::JOB_CANCELLED, v1::JOB_TIMEOUT, v1::JOB_NODE_FAIL}) {
        if (states->any || states->wanted.contains(s)) live.add_states(s);
      }
      absl::StatusOr<v1::ListJobsResponse> listed = client.ListJobs(live);
      if (!listed.ok()) return listed.status();
      for (const v1::Job& job : listed->jobs()) {
        const bool id_wanted = ids.empty() || ids.contains(job.id()) ||
                               (job.array_job_id() > 0 && ids.contains(job.array_job_id()));
        if (id_wanted &&
            (history->account().empty() || job.spec().account() == history->account())) {
          jobs[job.id()] = job;
        }
      }
    }
    if (want_finished) {
      absl::StatusOr<v1::JobHistoryResponse> ended = client.JobHistory(*history);
      if (!ended.ok()) return ended.status();
      for (const v1::Job& job : ended->jobs()) jobs[job.id()] = job;
    }
    std::vector<std::vector<std::string>> rows;
    if (!o.no_header) rows.push_back(AccountingHeader(*columns));
    for (const auto& [id, job] : jobs) {
      if (!NameWanted(o.names, job)) continue;
      // -D: the attempts a requeue ended first, as Slurm lists duplicates.
      if (o.duplicates) {
        for (const v1::JobAttempt& attempt : job.past_attempts()) {
          std::ranges::move(PastAttemptRows(*columns, job, attempt, now, o.allocations),
                            std::back_inserter(rows));
        }
      }
      rows.push_back(AccountingRow(*columns, job, nullptr, now));
      if (o.allocations) continue;
      for (const v1::JobStep& step : job.steps()) {
        rows.push_back(AccountingRow(*columns, job, &step, now));
      }
    }
    if (o.parsable || o.parsable2) {
      PrintParsable(rows, o.parsable ? ParsableEnd::kTrailingBar : ParsableEnd::kNoTrailingBar,
                    std::cout);
    } else {
      PrintAccountingTable(*columns, rows, o.no_header ? TableHeader::kWithout : TableHeader::kWith,
                           std::cout);
    }
    return absl::OkStatus();
  }));
}

}  // namespace

void AddSacctCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SacctOptions>();
  HistoryFilters& f = o->filters;
  app.set_help_flag("-h,--help", "print this help and exit");
  app.add_option("-j,--jobs", o->jobs, "only these jobs (ID[,ID...]; repeatable)")
      ->type_name("LIST");
  app.add_option("-o,--format", o->format,
                 fmt::format("fields, comma separated, each optionally %WIDTH: {}",
                             fmt::join(AccountingFieldNames(), ",")))
      ->type_name("FIELDS");
  app.add_flag("-b,--brief", o->brief, "JobID, State and ExitCode only");
  app.add_flag("-l,--long", o->long_listing, "many fields");
  app.add_flag("-p,--parsable", o->parsable, "fields separated by |, a | ending each line");
  app.add_flag("-P,--parsable2", o->parsable2, "fields separated by |");
  app.add_flag("-n,--noheader", o->no_header, "leave out the header");
  app.add_flag("-X,--allocations", o->allocations, "jobs only, not their steps");
  app.add_option("-u,--user", f.user, "only this user's jobs")->type_name("NAME");
  app.add_flag("-a,--allusers", f.all_users, "every user's jobs");
  app.add_option("-A,--accounts", f.account, "only jobs of this account")->type_name("NAME");
  app.add_option("-s,--state", f.states, "only jobs in these states (CD,F,R,PD,...)")
      ->type_name("LIST");
  app.add_option("-S,--starttime", f.since,
                 "jobs since TIME (default: midnight, unless -j is given)")
      ->type_name("TIME");
  app.add_option("-E,--endtime", f.until, "jobs before TIME")->type_name("TIME");
  app.add_option("--name", o->names, "only jobs with these names")->type_name("LIST");
  app.add_flag("-D,--duplicates", o->duplicates,
               "also the attempts of requeued jobs that ended, each with its steps");
  app.add_flag("-L,--allclusters,-v,--verbose")->description("accepted: there is one cluster");
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer(
      "Cohort's sacct: finished jobs from the controller's records and the jobs still pending\n"
      "or running, each followed by its steps (12.batch, 12.0, ...) unless -X. See\n"
      "docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = Sacct(*o); });
}

}  // namespace cohort::cli
