// SPDX-License-Identifier: Apache-2.0
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct CancelOptions {
  ConnectionOptions connection;
  std::vector<std::string> ids;
  std::string signal;
};

// A signal by name (USR1, SIGUSR1, usr1) or number.
absl::StatusOr<int> ParseSignal(std::string_view text) {
  if (const std::optional<int> signal = SignalNumber(text)) return *signal;
  return absl::InvalidArgumentError(fmt::format(
      "--signal \"{}\": name a signal such as USR1, TERM, INT or KILL, or give its number "
      "(1-{})",
      text, NSIG - 1));
}

// Sends `request` with -s's signal, if any; 2 (after saying why) when it
// names no signal.
int SendCancel(const CancelOptions& o, v1::CancelJobRequest request) {
  if (!o.signal.empty()) {
    absl::StatusOr<int> signal = ParseSignal(o.signal);
    if (!signal.ok()) {
      std::cerr << fmt::format("cohort: {}\n", signal.status());
      return 2;
    }
    request.set_signal(*signal);
  }
  return CallController(
      o.connection, [&](ControllerClient& client) { return client.CancelJob(request).status(); });
}

// JOB.STEP (12.0, 12_3.1): that step alone, cancelled or with -s signalled;
// none for a job's id. InvalidArgument for 12.batch or a step that is no
// number: a job's batch step is the job.
struct StepName {
  std::string job;
  int step = 0;
};
absl::StatusOr<std::optional<StepName>> StepOf(const std::string& id) {
  const std::size_t dot = id.find('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string_view step(id.data() + dot + 1, id.size() - dot - 1);
  int number = -1;
  const auto [end, ec] = std::from_chars(step.data(), step.data() + step.size(), number);
  if (ec != std::errc() || end != step.data() + step.size() || number < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "\"{}\": a step is JOB.N (12.0); the batch step ({}.batch) is the job itself: cancel {}",
        id, id.substr(0, dot), id.substr(0, dot)));
  }
  return StepName{id.substr(0, dot), number};
}

// The steps among `ids` (JOB.STEP) cancelled or signalled, each alone; the
// jobs' ids are left in `ids`. 0, or the status of the first that failed.
int CancelSteps(const CancelOptions& o, std::vector<std::string>& ids) {
  std::vector<StepName> steps;
  std::vector<std::string> jobs;
  for (const std::string& id : ids) {
    absl::StatusOr<std::optional<StepName>> step = StepOf(id);
    if (!step.ok()) {
      std::cerr << fmt::format("cohort: {}\n", step.status().message());
      return 2;
    }
    if (*step) {
      steps.push_back(**step);
    } else {
      jobs.push_back(id);
    }
  }
  ids = std::move(jobs);
  if (steps.empty()) return 0;
  int signal = 0;
  if (!o.signal.empty()) {
    absl::StatusOr<int> parsed = ParseSignal(o.signal);
    if (!parsed.ok()) {
      std::cerr << fmt::format("cohort: {}\n", parsed.status());
      return 2;
    }
    signal = *parsed;
  }
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    for (const StepName& step : steps) {
      v1::SignalStepRequest request;
      request.set_job_ref(step.job);
      request.set_step_id(step.step);
      request.set_signal(signal);
      if (absl::Status done = client.SignalStep(request).status(); !done.ok()) return done;
    }
    return absl::OkStatus();
  });
}

int Cancel(const CancelOptions& given) {
  CancelOptions o = given;
  const bool named = !o.ids.empty();
  if (const int steps = CancelSteps(o, o.ids); steps != 0 || (named && o.ids.empty())) {
    return steps;
  }
  absl::StatusOr<std::vector<JobRef>> refs = ParseJobRefs(o.ids, "cancel");
  if (!refs.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refs.status());
    return 2;
  }
  // Every job goes as a reference (`12`, `12_3`); job_ids stays empty, so
  // that no job is named twice.
  v1::CancelJobRequest request;
  for (const JobRef& ref : *refs) request.add_job_refs(FormatJobRef(ref));
  return SendCancel(o, std::move(request));
}

// scancel's filters: with no job named, every job they match is cancelled.
struct ScancelOptions {
  CancelOptions cancel;
  std::string user;
  bool me = false;
  std::string states;
  std::string partition;
  std::string name;
  std::string account;
};

// Whether the filters match `job`, and it is one of the jobs named (`12`
// names every task of array 12, `12_3` one), if any are.
bool Matches(const v1::Job& job, const ScancelOptions& o) {
  if (!o.partition.empty() && job.spec().partition() != o.partition) return false;
  if (!o.name.empty() && job.spec().name() != o.name) return false;
  if (!o.account.empty() && job.spec().account() != o.account) return false;
  const std::vector<std::string>& named = o.cancel.ids;
  const auto is_named = [&](const std::string& id) {
    return std::find(named.begin(), named.end(), id) != named.end();
  };
  return named.empty() || is_named(JobDisplayId(job)) || is_named(std::to_string(job.id())) ||
         (job.array_job_id() > 0 && is_named(std::to_string(job.array_job_id())));
}

// The jobs scancel's filters match, by their own ids (an array's tasks not
// yet started are one job): listed by the controller (only the caller's,
// unless -u), then matched here.
absl::StatusOr<std::vector<std::int64_t>> FilteredJobs(ControllerClient& client,
                                                       const ScancelOptions& o) {
  v1::ListJobsRequest request;
  request.set_all_users(!o.me && !o.user.empty());
  request.set_user_name(o.me ? std::string() : o.user);
  for (const std::string_view word : CommaList(o.states)) {
    const std::optional<v1::JobState> state = ParseJobState(word);
    if (!state || IsFinished(*state)) {
      return absl::InvalidArgumentError(fmt::format(
          "-t/--state: \"{}\" is not a state jobs are cancelled in; write PENDING (PD), RUNNING "
          "(R) or COMPLETING (CG)",
          word));
    }
    request.add_states(*state);
  }
  absl::StatusOr<v1::ListJobsResponse> listed = client.ListJobs(request);
  if (!listed.ok()) return listed.status();
  std::vector<std::int64_t> ids;
  for (const v1::Job& job : listed->jobs()) {
    if (Matches(job, o)) ids.push_back(job.id());
  }
  return ids;
}

int Scancel(const ScancelOptions& given) {
  const bool filtered = given.me || !given.user.empty() || !given.states.empty() ||
                        !given.partition.empty() || !given.name.empty() || !given.account.empty();
  if (given.cancel.ids.empty() && !filtered) {
    std::cerr << "scancel: error: No job identification provided; name jobs, or filter them "
                 "with -u, --me, -t, -p, -n or -A\n";
    return 1;
  }
  if (!filtered) return Cancel(given.cancel);
  // Steps named (12.0) go alone; the filters choose among the jobs named,
  // and with only steps named, among none.
  ScancelOptions o = given;
  const bool named = !o.cancel.ids.empty();
  if (const int steps = CancelSteps(o.cancel, o.cancel.ids); steps != 0) return steps;
  if (named && o.cancel.ids.empty()) return 0;
  v1::CancelJobRequest request;
  const int status = CallController(o.cancel.connection, [&](ControllerClient& client) {
    absl::StatusOr<std::vector<std::int64_t>> ids = FilteredJobs(client, o);
    if (!ids.ok()) return ids.status();
    for (const std::int64_t id : *ids) request.add_job_ids(id);
    return absl::OkStatus();
  });
  if (status != 0 || request.job_ids().empty()) return status;
  return SendCancel(o.cancel, std::move(request));
}

}  // namespace

void AddCancelCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CancelOptions>();
  CLI::App* cancel = app.add_subcommand(
      "cancel",
      "cancel jobs, or send their ranks a signal (like scancel); prints nothing on success");
  cancel
      ->add_option("JOB", o->ids,
                   "the jobs: an id (12; for an array, every task of it) or one array task "
                   "(12_3); or a step of one (12.0), alone")
      ->required();
  cancel->add_option("-s,--signal", o->signal,
                     "send this signal to every rank instead of cancelling: a name (USR1, TERM, "
                     "KILL) or a number");
  AddConnectionOptions(*cancel, o->connection);
  cancel->callback([o, &exit_code] { exit_code = Cancel(*o); });
}

void AddScancelCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ScancelOptions>();
  app.add_option("JOB", o->cancel.ids,
                 "the jobs: ids (12) or array tasks (12_3); or steps (12.0), each alone");
  app.add_option("-s,--signal", o->cancel.signal,
                 "send this signal to the jobs' ranks instead of cancelling (USR1, TERM, 10)");
  app.add_option("-u,--user", o->user, "the jobs of this user");
  app.add_flag("--me", o->me, "your jobs");
  app.add_option("-t,--state", o->states, "the jobs in these states (PENDING, RUNNING)");
  app.add_option("-p,--partition", o->partition, "the jobs of this partition");
  app.add_option("-n,--name,--jobname", o->name, "the jobs with this name");
  app.add_option("-A,--account", o->account, "the jobs of this account");
  app.add_flag("-Q,--quiet,-v,--verbose")->description("accepted: scancel prints only errors");
  RefuseFlags(app, "-b,--batch,-f,--full",
              "a signal reaches the steps' ranks, never the batch shell; trap it in a step, or "
              "use sbatch --signal=B:SIG@SECONDS for the batch shell's warning");
  AddConnectionOptions(app, o->cancel.connection, ConfigShortName::kNone);
  app.footer(
      "Cohort's scancel: cancels jobs, or with -s sends their ranks a signal (the batch shell\n"
      "is not signalled, as scancel without -b). See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = SlurmStatus(Scancel(*o)); });
}

}  // namespace cohort::cli
