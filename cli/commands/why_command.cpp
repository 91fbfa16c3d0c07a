// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "format/job_format.h"
#include "format/why_view.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct WhyOptions {
  ConnectionOptions connection;
  std::string job;
  bool json = false;
};

int Why(const WhyOptions& o) {
  absl::StatusOr<JobRef> ref = ParseJobRef(o.job, "why");
  if (!ref.ok()) {
    std::cerr << fmt::format("cohort: {}\n", ref.status());
    return 2;
  }
  v1::ExplainJobRequest request;
  request.set_job_ref(FormatJobRef(*ref));
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ExplainJobResponse> response = client.ExplainJob(request);
    if (!response.ok()) return response.status();
    const std::int64_t now = NowMs();
    if (o.json) {
      std::cout << ExplainToJson(*response, now).dump(2) << '\n';
    } else {
      std::cout << ExplainText(*response, now);
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddWhyCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<WhyOptions>();
  CLI::App* why = app.add_subcommand(
      "why",
      "say in words what keeps a job from starting, when it is expected to start, and "
      "what would let it start sooner");
  why->add_option("JOB", o->job, "the job: its id (12), or an array task (12_3)")->required();
  why->add_flag("--json", o->json,
                "print {\"job\", \"summary\", \"blockers\", \"expected_start_ms\", "
                "\"suggestions\", \"pending_reason\", \"wait\", \"sooner\"} as JSON");
  AddConnectionOptions(*why, o->connection);
  why->footer(
      "The blockers come most decisive first: the resources it lacks (and which switch domains\n"
      "come closest), the jobs ahead of it, a limit and its value, a hold, or a dependency.\n"
      "The expected start is the backfill plan's, and moves as jobs end early or arrive.");
  why->callback([o, &exit_code] { exit_code = Why(*o); });
}

}  // namespace cohort::cli
