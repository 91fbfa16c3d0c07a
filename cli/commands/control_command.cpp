// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct ControlOptions {
  ConnectionOptions connection;
  std::vector<std::string> jobs;
};

std::string_view EnvValue(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

// Sends `action` for `refs`; prints nothing on success, as scontrol.
int Control(const ControlOptions& o, const std::vector<JobRef>& refs, v1::JobAction action) {
  v1::ControlJobsRequest request;
  request.set_action(action);
  for (const JobRef& ref : refs) request.add_job_refs(FormatJobRef(ref));
  return CallController(
      o.connection, [&](ControllerClient& client) { return client.ControlJobs(request).status(); });
}

int ControlGiven(const ControlOptions& o, std::string_view verb, v1::JobAction action) {
  // As scontrol, a word may list several jobs: 12,13.
  std::vector<std::string> words;
  for (const std::string& word : o.jobs) {
    for (const std::string_view item : CommaList(word)) words.emplace_back(item);
  }
  absl::StatusOr<std::vector<JobRef>> refs = ParseJobRefs(words, verb);
  if (!refs.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refs.status());
    return 2;
  }
  return Control(o, *refs, action);
}

// checkpoint-done: the job given, else the one this process runs in.
int CheckpointDone(const ControlOptions& o) {
  constexpr std::string_view kVerb = "checkpoint-done";
  if (!o.jobs.empty()) return ControlGiven(o, kVerb, v1::JOB_CHECKPOINT_DONE);
  absl::StatusOr<JobRef> ref =
      JobRefFromEnvironment(EnvValue("COHORT_JOB_ID"), EnvValue("SLURM_JOB_ID"), kVerb);
  if (!ref.ok()) {
    std::cerr << fmt::format("cohort: {}\n", ref.status());
    return 2;
  }
  return Control(o, {*ref}, v1::JOB_CHECKPOINT_DONE);
}

constexpr std::string_view kJobHelp =
    "the jobs: an id (12; for an array, every task of it) or one array task (12_3)";

CLI::App* AddControl(CLI::App& app, std::string name, std::string description,
                     std::shared_ptr<ControlOptions> o) {
  CLI::App* command = app.add_subcommand(std::move(name), std::move(description));
  command->add_option("JOB", o->jobs, std::string(kJobHelp))->required();
  AddConnectionOptions(*command, o->connection);
  return command;
}

}  // namespace

void AddControlCommands(CLI::App& app, int& exit_code) {
  auto hold = std::make_shared<ControlOptions>();
  AddControl(app, "hold",
             "keep pending jobs from starting until cohort release (like scontrol hold); prints "
             "nothing on success",
             hold)
      ->callback([hold, &exit_code] { exit_code = ControlGiven(*hold, "hold", v1::JOB_HOLD); });

  auto release = std::make_shared<ControlOptions>();
  AddControl(app, "release",
             "let held jobs start again (like scontrol release); prints nothing on success",
             release)
      ->callback([release, &exit_code] {
        exit_code = ControlGiven(*release, "release", v1::JOB_RELEASE);
      });

  auto requeue = std::make_shared<ControlOptions>();
  AddControl(app, "requeue",
             "stop running jobs and queue them again with the same id and their next attempt "
             "(like scontrol requeue); prints nothing on success",
             requeue)
      ->callback([requeue, &exit_code] {
        exit_code = ControlGiven(*requeue, "requeue", v1::JOB_REQUEUE);
      });

  auto done = std::make_shared<ControlOptions>();
  CLI::App* checkpoint = app.add_subcommand(
      "checkpoint-done",
      "tell the controller that a job being preempted has saved its state, so that it is "
      "stopped now instead of at the end of its grace time");
  checkpoint->add_option("JOB", done->jobs,
                         "the job (12, or 12_3); default: the job this runs in ($COHORT_JOB_ID, "
                         "else $SLURM_JOB_ID)");
  AddConnectionOptions(*checkpoint, done->connection);
  checkpoint->footer(
      "Run it from inside the job, after the checkpoint is written, when the preemption warning\n"
      "signal (SIGUSR1 unless the partition or QOS says otherwise) has arrived:\n"
      "  trap 'save_checkpoint && cohort checkpoint-done' USR1\n"
      "A job that is not being preempted is refused (exit 1).");
  checkpoint->callback([done, &exit_code] { exit_code = CheckpointDone(*done); });
}

}  // namespace cohort::cli
