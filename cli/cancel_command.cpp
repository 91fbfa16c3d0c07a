// SPDX-License-Identifier: Apache-2.0
#include <signal.h>

#include <charconv>
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

namespace cohort::cli {
namespace {

struct CancelOptions {
  ConnectionOptions connection;
  std::vector<std::string> ids;
  std::string signal;
};

std::optional<std::int64_t> ParseNumber(std::string_view text) {
  std::int64_t n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

// A signal by name (USR1, SIGUSR1, usr1) or number.
absl::StatusOr<int> ParseSignal(std::string_view text) {
  if (const std::optional<int> signal = SignalNumber(text)) return *signal;
  return absl::InvalidArgumentError(fmt::format(
      "--signal \"{}\": name a signal such as USR1, TERM, INT or KILL, or give its number "
      "(1-{})",
      text, NSIG - 1));
}

int Cancel(const CancelOptions& o) {
  v1::CancelJobRequest request;
  for (const std::string& text : o.ids) {
    const std::optional<std::int64_t> id = ParseNumber(text);
    if (!id || *id < 1) {
      std::cerr << fmt::format(
          "cohort: cancel: \"{}\" is not a job id; job ids are positive numbers (see cohort "
          "queue)\n",
          text);
      return 2;
    }
    request.add_job_ids(*id);
  }
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
  cancel->add_option("ID", o->ids, "ids of the jobs")->required();
  cancel->add_option("-s,--signal", o->signal,
                     "send this signal to every rank instead of cancelling: a name (USR1, TERM, "
                     "KILL) or a number");
  AddConnectionOptions(*cancel, o->connection);
  cancel->callback([o, &exit_code] { exit_code = Cancel(*o); });
}

}  // namespace cohort::cli
