// SPDX-License-Identifier: Apache-2.0
// `scontrol`: show jobs, nodes, partitions and hostlists; hold, release,
// requeue and update jobs, as Slurm's scontrol does.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "spec/job_ref.h"
#include "spec/job_resources.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct JobUpdateWords {
  ConnectionOptions connection;
  std::vector<std::string> words;  ///< KEY=VALUE, as scontrol update takes them
};

// scontrol update's KEY=VALUE words as an UpdateJob request. InvalidArgument
// names a word that is not one of the keys Cohort changes.
absl::StatusOr<v1::UpdateJobRequest> ParseUpdate(const std::vector<std::string>& words) {
  v1::UpdateJobRequest request;
  for (const std::string& word : words) {
    const std::size_t equals = word.find('=');
    const std::string key = word.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : word.substr(equals + 1);
    if (equals == std::string::npos || value.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("update: \"{}\" is not KEY=VALUE; write JobId=12 TimeLimit=1:00:00", word));
    }
    if (EqualsIgnoreCase(key, "JobId") || EqualsIgnoreCase(key, "Job")) {
      request.set_job_ref(value);
    } else if (EqualsIgnoreCase(key, "TimeLimit")) {
      absl::StatusOr<std::chrono::seconds> limit = ParseSlurmTime(value);
      if (!limit.ok()) {
        return absl::InvalidArgumentError(fmt::format("TimeLimit: {}", limit.status().message()));
      }
      request.set_time_limit_s(limit->count() == 0 ? kUnlimited.count() : limit->count());
    } else if (EqualsIgnoreCase(key, "Partition")) {
      request.set_partition(value);
    } else if (EqualsIgnoreCase(key, "NumNodes") || EqualsIgnoreCase(key, "MinNodes")) {
      absl::StatusOr<NodeRange> nodes = ParseNodeRange(value);
      if (!nodes.ok()) return nodes.status();
      request.set_nodes(nodes->min);
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "update: {} cannot be changed here; Cohort changes a pending job's TimeLimit, "
          "Partition and NumNodes (cancel and submit again for anything else)",
          key));
    }
  }
  if (request.job_ref().empty()) {
    return absl::InvalidArgumentError("update: name the job with JobId=12");
  }
  if (!request.has_time_limit_s() && !request.has_partition() && !request.has_nodes()) {
    return absl::InvalidArgumentError(
        "update: nothing to change; give TimeLimit=, Partition= or NumNodes=");
  }
  return request;
}

int UpdateJob(const JobUpdateWords& o) {
  absl::StatusOr<v1::UpdateJobRequest> request = ParseUpdate(o.words);
  if (!request.ok()) {
    std::cerr << fmt::format("scontrol: error: {}\n", request.status().message());
    return 1;
  }
  if (absl::StatusOr<JobRef> ref = ParseJobRef(request->job_ref(), "update"); !ref.ok()) {
    std::cerr << fmt::format("scontrol: error: {}\n", ref.status().message());
    return 1;
  }
  return CallController(
      o.connection, [&](ControllerClient& client) { return client.UpdateJob(*request).status(); });
}

}  // namespace

void AddScontrolCommand(CLI::App& app, int& exit_code) {
  app.require_subcommand(1);
  AddScontrolShow(app, exit_code);
  AddControlCommands(app, exit_code);
  AddReconfigureCommand(app, exit_code);
  auto update = std::make_shared<JobUpdateWords>();
  CLI::App* command = app.add_subcommand(
      "update", "change a pending job: update JobId=12 TimeLimit=2:00:00 Partition=P NumNodes=4");
  command->add_option("KEY=VALUE", update->words, "JobId= and what to change")->required();
  AddConnectionOptions(*command, update->connection, ConfigShortName::kNone);
  command->callback([update, &exit_code] { exit_code = UpdateJob(*update); });
  app.add_flag("-o,--oneliner,-d,--details,-Q,--quiet,-v,--verbose")
      ->description("accepted: the output is always the full record");
  app.footer(
      "Cohort's scontrol: show job|node|partition|hostnames|hostlist, hold, release,\n"
      "requeue, update JobId=... TimeLimit=|Partition=|NumNodes= (pending jobs) and\n"
      "reconfigure. See docs/slurm.md.");
  // Slurm's commands exit 1 for any failure.
  app.final_callback([&exit_code] { exit_code = SlurmStatus(exit_code); });
}

}  // namespace cohort::cli
