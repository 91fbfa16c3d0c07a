// SPDX-License-Identifier: Apache-2.0
#include <signal.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "commands.h"
#include "controller_client.h"
#include "job_format.h"
#include "job_ref.h"

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

int Cancel(const CancelOptions& o) {
  absl::StatusOr<std::vector<JobRef>> refs = ParseJobRefs(o.ids, "cancel");
  if (!refs.ok()) {
    std::cerr << fmt::format("cohort: {}\n", refs.status());
    return 2;
  }
  // Every job goes as a reference (`12`, `12_3`); job_ids stays empty, so
  // that no job is named twice.
  v1::CancelJobRequest request;
  for (const JobRef& ref : *refs) request.add_job_refs(FormatJobRef(ref));
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

}  // namespace

void AddCancelCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CancelOptions>();
  CLI::App* cancel = app.add_subcommand(
      "cancel",
      "cancel jobs, or send their ranks a signal (like scancel); prints nothing on success");
  cancel
      ->add_option("JOB", o->ids,
                   "the jobs: an id (12; for an array, every task of it) or one array task "
                   "(12_3)")
      ->required();
  cancel->add_option("-s,--signal", o->signal,
                     "send this signal to every rank instead of cancelling: a name (USR1, TERM, "
                     "KILL) or a number");
  AddConnectionOptions(*cancel, o->connection);
  cancel->callback([o, &exit_code] { exit_code = Cancel(*o); });
}

}  // namespace cohort::cli
