// SPDX-License-Identifier: Apache-2.0
// sstat: what a running job's steps use now, from its nodes' last samples
// (JobAcctGatherFrequency): CPU time, resident memory and, where NVML is
// present, GPU utilization and memory.
#include <charconv>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/print_fields.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
// Its own namespace: unity builds compile this file with other commands'.
namespace sstat_cli {
namespace {

struct SstatOptions {
  ConnectionOptions connection;
  FieldsStyle style;  // -n, -p, -P
  std::string jobs;   // -j: JOB[.STEP][,…]
  std::string format =
      "JobID,NTasks,AveCPU,AveRSS,MaxRSS,MaxRSSNode,MaxRSSTask,TRESUsageInAve,"
      "TRESUsageInMax";
  bool all_steps = false;  // -a: accepted; every running step is shown anyway
  bool help_format = false;
};

// One step's figures, and the job's id as users write it.
struct Row {
  const v1::LiveUsage& usage;
  const std::string& job;
};

struct Field {
  std::string_view name;
  int width;
  std::string (*value)(const Row& row);
};

std::int64_t PerTask(std::int64_t total, const v1::LiveUsage& u) {
  return u.tasks() > 0 ? total / u.tasks() : 0;
}

// Per GPU: the average of its GPUs (utilization and memory), or the most
// of one.
std::string TresIn(const v1::LiveUsage& u, bool max) {
  const int util = !u.gpu_measured() ? -1 : max ? u.gpu_util_max_pct() : u.gpu_util_pct();
  const std::int64_t memory = max            ? u.gpu_mem_max_mb()
                              : u.gpus() > 0 ? u.gpu_mem_mb() / u.gpus()
                                             : 0;
  return FormatTresUsage(max ? u.max_cpu_ms() : PerTask(u.cpu_ms(), u),
                         max ? u.max_rss_kb() : PerTask(u.rss_kb(), u), memory, util);
}

constexpr Field kFields[] = {
    {"JobID", -12,
     [](const Row& r) {
       return r.usage.step().empty() ? r.job : fmt::format("{}.{}", r.job, r.usage.step());
     }},
    {"NTasks", 8, [](const Row& r) { return std::to_string(r.usage.tasks()); }},
    {"NNodes", 8, [](const Row& r) { return std::to_string(r.usage.nodes()); }},
    {"AveCPU", 10, [](const Row& r) { return FormatCpuTime(PerTask(r.usage.cpu_ms(), r.usage)); }},
    {"TotalCPU", 10, [](const Row& r) { return FormatCpuTime(r.usage.cpu_ms()); }},
    {"AveRSS", 10,
     [](const Row& r) { return FormatUsageSize(PerTask(r.usage.rss_kb(), r.usage)); }},
    {"MaxRSS", 10, [](const Row& r) { return FormatUsageSize(r.usage.max_rss_kb()); }},
    {"MaxRSSNode", -10, [](const Row& r) { return r.usage.max_rss_node(); }},
    {"MaxRSSTask", 10, [](const Row& r) { return std::to_string(r.usage.max_rss_task()); }},
    {"TRESUsageInAve", -40, [](const Row& r) { return TresIn(r.usage, false); }},
    {"TRESUsageInMax", -40, [](const Row& r) { return TresIn(r.usage, true); }},
    {"TRESUsageInMaxNode", -30,
     [](const Row& r) {
       return fmt::format("cpu={},mem={}", r.usage.max_cpu_node(), r.usage.max_rss_node());
     }},
    {"TRESUsageInMaxTask", -30,
     [](const Row& r) {
       return fmt::format("cpu={},mem={}", r.usage.max_cpu_task(), r.usage.max_rss_task());
     }},
    {"TRESUsageInTot", -40,
     [](const Row& r) {
       return FormatTresUsage(r.usage.cpu_ms(), r.usage.rss_kb(), r.usage.gpu_mem_mb(),
                              r.usage.gpu_measured() ? r.usage.gpu_util_pct() : -1);
     }},
};

std::string FieldNames() {
  std::vector<std::string_view> names;
  for (const Field& f : kFields) names.push_back(f.name);
  return fmt::format("{}", fmt::join(names, " "));
}

struct Column {
  const Field* field;
  int width;
};

absl::StatusOr<std::vector<Column>> ParseFormat(std::string_view list) {
  std::vector<Column> columns;
  for (const std::string_view item : CommaList(list)) {
    const std::size_t percent = item.find('%');
    const std::string_view name = item.substr(0, percent);
    const Field* found = nullptr;
    for (const Field& f : kFields) {
      if (EqualsIgnoreCase(f.name, name)) found = &f;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "--format: no field {}; Cohort's sstat has: {} (see docs/slurm.md)", name, FieldNames()));
    }
    int width = found->width;
    if (percent != std::string_view::npos) {
      int asked = 0;
      const std::string_view digits = item.substr(percent + 1);
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), asked);
      if (digits.empty() || digits.size() > 4 || error != std::errc() ||
          end != digits.data() + digits.size() || asked <= 0) {
        return absl::InvalidArgumentError(
            fmt::format("--format: {} is no field width; write NAME%WIDTH, e.g. MaxRSS%12", item));
      }
      width = width < 0 ? -asked : asked;
    }
    columns.push_back({found, width});
  }
  if (columns.empty()) {
    return absl::InvalidArgumentError("--format is empty; name fields, e.g. JobID,MaxRSS");
  }
  return columns;
}

// `12`, `12_3`, `12.batch`, `12.0`: the job and, when given, the step.
struct StepRef {
  JobRef job;
  std::string step;  ///< empty: every step
};

absl::StatusOr<std::vector<StepRef>> ParseJobs(std::string_view list) {
  std::vector<StepRef> refs;
  for (const std::string_view item : CommaList(list)) {
    const std::size_t dot = item.find('.');
    absl::StatusOr<JobRef> job = ParseJobRef(item.substr(0, dot), "sstat");
    if (!job.ok()) return job.status();
    StepRef& ref = refs.emplace_back(StepRef{.job = *job, .step = {}});
    if (dot != std::string_view::npos) ref.step = std::string(item.substr(dot + 1));
    if (dot != std::string_view::npos && ref.step.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("-j {}: a step follows the dot, e.g. {}0 or {}batch", item,
                      item.substr(0, dot + 1), item.substr(0, dot + 1)));
    }
  }
  if (refs.empty()) {
    return absl::InvalidArgumentError("name a running job: sstat -j JOB[.STEP], e.g. -j 12.0");
  }
  return refs;
}

absl::Status Run(ControllerClient& client, const SstatOptions& o, const std::vector<StepRef>& refs,
                 const std::vector<Column>& columns) {
  std::vector<FieldColumn> header;
  for (const Column& c : columns) header.push_back({std::string(c.field->name), c.width});
  std::vector<std::vector<std::string>> rows;
  for (const StepRef& ref : refs) {
    v1::JobUsageRequest request;
    request.set_job_ref(FormatJobRef(ref.job));
    absl::StatusOr<v1::JobUsageResponse> usage = client.GetJobUsage(request);
    if (!usage.ok()) return usage.status();
    bool found = false;
    for (const v1::LiveUsage& step : usage->steps()) {
      if (!ref.step.empty() && step.step() != ref.step) continue;
      found = true;
      const Row row{.usage = step, .job = usage->display_id()};
      std::vector<std::string>& cells = rows.emplace_back();
      for (const Column& c : columns) cells.push_back(c.field->value(row));
    }
    if (!found && !ref.step.empty()) {
      return absl::NotFoundError(fmt::format(
          "step {}.{} has no sample: it is not running, or it started less than {} s ago "
          "(JobAcctGatherFrequency)",
          usage->display_id(), ref.step, usage->gather_interval_s()));
    }
    if (!found && usage->gather_interval_s() == 0) {
      return absl::FailedPreconditionError(
          "the cluster samples no usage (JobAcctGatherFrequency=0); ask its operators");
    }
  }
  PrintFields(o.style, header, rows, std::cout);
  return absl::OkStatus();
}

int Sstat(const SstatOptions& o) {
  if (o.help_format) {
    std::cout << FieldNames() << "\n";
    return 0;
  }
  absl::StatusOr<std::vector<StepRef>> refs = ParseJobs(o.jobs);
  absl::StatusOr<std::vector<Column>> columns = ParseFormat(o.format);
  const absl::Status bad = !refs.ok() ? refs.status() : columns.status();
  if (!bad.ok()) {
    std::cerr << fmt::format("sstat: error: {}\n", bad.message());
    return 1;
  }
  return SlurmStatus(CallController(
      o.connection, [&](ControllerClient& client) { return Run(client, o, *refs, *columns); }));
}

}  // namespace
}  // namespace sstat_cli

void AddSstatCommand(CLI::App& app, int& exit_code) {
  using sstat_cli::Sstat;
  using sstat_cli::SstatOptions;
  auto o = std::make_shared<SstatOptions>();
  app.set_help_flag("--help", "print this help and exit");
  AddFieldsStyleOptions(app, o->style);
  app.add_option("-j,--jobs", o->jobs, "JOB[.STEP][,…]: running jobs or steps, e.g. 12.0");
  app.add_option("-o,--format,--fields", o->format, "fields, e.g. JobID,AveCPU,MaxRSS%12");
  app.add_flag("-a,--allsteps", o->all_steps, "every step of the job (as without a step)");
  app.add_flag("-e,--helpformat", o->help_format, "list the fields and exit");
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  RefuseFlags(app, "-i,--pidformat",
              "Cohort's sstat shows steps, not their processes; see the ranks' pids with "
              "`cohort show job JOB --ranks` and ps");
  app.footer(
      "Cohort's sstat: what running steps use now, from their nodes' last samples\n"
      "(JobAcctGatherFrequency, 30 s by default): CPU time and resident memory of each\n"
      "rank's processes, and where NVML is present the GPUs' utilization and memory\n"
      "(gres/gpuutil, gres/gpumem, per GPU). Without a step, every running step. After\n"
      "the job, sacct has the same fields. See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = Sstat(*o); });
}

}  // namespace cohort::cli
