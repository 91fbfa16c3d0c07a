// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/policy_format.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct PriorityOptions {
  ConnectionOptions connection;
  std::vector<std::string> jobs;
  std::string user;
  bool normalised = false;
  bool json = false;
  bool no_header = false;
};

int Priority(const PriorityOptions& o) {
  v1::PriorityRequest request;
  if (!o.jobs.empty()) {
    absl::StatusOr<std::vector<JobRef>> refs = ParseJobRefs(o.jobs, "priority");
    if (!refs.ok()) {
      std::cerr << fmt::format("cohort: {}\n", refs.status());
      return 2;
    }
    for (const JobRef& ref : *refs) request.add_job_refs(FormatJobRef(ref));
  }
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::PriorityResponse> response = client.GetPriorities(request);
    if (!response.ok()) return response.status();
    if (!o.user.empty()) {
      // The controller answers for every user; -u keeps one user's jobs.
      v1::PriorityResponse mine = *response;
      mine.clear_jobs();
      for (const v1::JobPriority& job : response->jobs()) {
        if (job.user_name() == o.user) *mine.add_jobs() = job;
      }
      *response = std::move(mine);
    }
    if (o.json) {
      std::cout << PrioritiesToJson(*response).dump(2) << '\n';
      return absl::OkStatus();
    }
    std::vector<std::vector<std::string>> rows = PriorityRows(
        *response, o.normalised ? PriorityValues::kNormalised : PriorityValues::kWeighted);
    if (o.no_header) rows.erase(rows.begin(), rows.begin() + 2);
    PrintColumns(rows, std::cout);
    return absl::OkStatus();
  });
}

}  // namespace

void AddPriorityCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PriorityOptions>();
  CLI::App* priority = app.add_subcommand(
      "priority", "show the factors of pending jobs' priority, highest first (like sprio)");
  priority->add_option("JOB", o->jobs,
                       "only these jobs: ids (12; an array's pending tasks) or array tasks "
                       "(12_3); default: every pending job");
  priority->add_option("-u,--user", o->user, "only this user's jobs (a login name)");
  priority->add_flag("-n,--raw", o->normalised,
                     "show each factor itself, from 0 to 1, instead of weight × factor");
  priority->add_flag("--noheader", o->no_header, "leave out the header and the Weights line");
  priority->add_flag("--json", o->json,
                     "print {\"weights\": {...}, \"jobs\": [...]} as JSON, with weighted and raw "
                     "values");
  AddConnectionOptions(*priority, o->connection);
  priority->footer(
      "PRIORITY is the sum of the weighted factors. Each factor is from 0 to 1: AGE grows with\n"
      "the time the job has been eligible (up to PriorityMaxAge), FAIRSHARE falls as its account\n"
      "uses more than its share (see cohort shares), JOBSIZE grows with the nodes it asks for\n"
      "(shrinks, with PriorityFavorSmall=YES), PARTITION follows its partition's PriorityTier\n"
      "and QOS its QOS's Priority. The Weights line shows cohort.conf's PriorityWeight* values.");
  priority->callback([o, &exit_code] { exit_code = Priority(*o); });
}

void AddSprioCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PriorityOptions>();
  app.set_help_flag("--help", "print this help and exit");  // -h is --noheader
  app.add_option("-j,--jobs", o->jobs, "only these jobs (12, 12_3)")->delimiter(',');
  app.add_option("-u,--user", o->user, "only this user's jobs");
  app.add_flag("-n,--norm", o->normalised, "each factor itself, from 0 to 1");
  app.add_flag("-h,--noheader", o->no_header, "leave out the header");
  app.add_flag("-l,--long,-w,--weights,-v,--verbose")
      ->description("accepted: every factor and the weights are always shown");
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer("Cohort's sprio: pending jobs' priority factors. See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = SlurmStatus(Priority(*o)); });
}

}  // namespace cohort::cli
