// SPDX-License-Identifier: Apache-2.0
#include "format/sacct_fields.h"

#include <charconv>
#include <chrono>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/text/slurm_time.h"
#include "format/job_format.h"

namespace cohort::cli {

enum class Align { kLeft, kRight };

struct AccountingField {
  std::string_view name;
  int width;
  Align align;
  std::string (*value)(const v1::Job& job, const v1::JobStep* step, std::int64_t now_ms);
};

namespace {

using Step = const v1::JobStep*;

enum class Usage { kAve, kMax };

// TRESUsageInAve or Max of a job's own launch or a step (their messages
// name the figures alike); empty before any of its ranks ended.
template <typename Message>
std::string TresIn(const Message& m, Usage which) {
  if (m.total_cpu_ms() == 0 && m.max_rss_kb() == 0 && !m.has_gpu()) return {};
  const bool max = which == Usage::kMax;
  const int util = !m.has_gpu() ? -1 : max ? m.gpu().util_max_pct() : m.gpu().util_ave_pct();
  return FormatTresUsage(max ? m.max_cpu_ms() : m.ave_cpu_ms(),
                         max ? m.max_rss_kb() : m.ave_rss_kb(),
                         max ? m.gpu().mem_max_mb() : m.gpu().mem_ave_mb(), util);
}

// A time as sacct writes it: local, or Unknown when it has not come.
std::string When(std::int64_t epoch_ms) {
  return epoch_ms > 0 ? FormatTimestamp(epoch_ms) : std::string("Unknown");
}

std::int64_t ElapsedSeconds(const v1::Job& job, Step step, std::int64_t now) {
  return step != nullptr ? StepElapsedSeconds(*step, now) : TimeUsedSeconds(job, now);
}

std::string StateOf(const v1::Job& job, Step step) {
  return step != nullptr ? step->state() : std::string(JobStateName(job.state()));
}

int Cpus(const v1::Job& job, Step step) {
  const v1::JobSpec& spec = job.spec();
  const int per_task = std::max(spec.cpus_per_task(), 1);
  if (step != nullptr) return step->tasks() * per_task;
  // Overcommitted, a node holds one task's CPUs.
  return spec.nodes() * (spec.overcommit() ? 1 : std::max(spec.tasks_per_node(), 1)) * per_task;
}

}  // namespace

int AllocCpus(const v1::Job& job) { return Cpus(job, nullptr); }

namespace {

std::string JobOnly(const std::string& value, Step step) {
  return step == nullptr ? value : std::string();
}

constexpr AccountingField kFields[] = {
    {"JobID", 12, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr ? StepDisplayId(j, *s) : JobDisplayId(j);
     }},
    {"JobIDRaw", 12, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr ? fmt::format("{}.{}", j.id(), s->name()) : std::to_string(j.id());
     }},
    {"JobName", 10, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr && s->step_id() < 0 ? std::string("batch") : j.spec().name();
     }},
    {"User", 9, Align::kLeft,
     [](const v1::Job& j, Step s, auto) { return JobOnly(JobUser(j), s); }},
    {"UID", 6, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(std::to_string(j.uid()), s); }},
    {"Account", 10, Align::kRight, [](const v1::Job& j, Step, auto) { return j.spec().account(); }},
    {"Partition", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(j.spec().partition(), s); }},
    {"QOS", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return JobOnly(j.qos().empty() ? j.spec().qos() : j.qos(), s);
     }},
    {"State", 10, Align::kRight, [](const v1::Job& j, Step s, auto) { return StateOf(j, s); }},
    {"ExitCode", 8, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr ? fmt::format("{}:{}", s->exit_code(), s->exit_signal())
                           : FormatExitCode(j);
     }},
    {"Elapsed", 10, Align::kRight,
     [](const v1::Job& j, Step s, std::int64_t now) {
       return FormatSlurmTime(std::chrono::seconds(ElapsedSeconds(j, s, now)));
     }},
    {"ElapsedRaw", 10, Align::kRight,
     [](const v1::Job& j, Step s, std::int64_t now) {
       return std::to_string(ElapsedSeconds(j, s, now));
     }},
    {"Submit", 19, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(When(j.submit_time_ms()), s); }},
    {"Eligible", 19, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(When(j.eligible_time_ms()), s); }},
    {"Start", 19, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return When(s != nullptr ? s->start_time_ms() : j.start_time_ms());
     }},
    {"End", 19, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return When(s != nullptr ? s->end_time_ms() : j.end_time_ms());
     }},
    {"Timelimit", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(FormatSlurmLimit(j.time_limit_s()), s); }},
    {"NNodes", 8, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return std::to_string(s != nullptr ? StepNodeCount(*s) : j.spec().nodes());
     }},
    {"NodeList", 15, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       if (s != nullptr) return s->nodes();
       return j.nodes().empty() ? std::string("None assigned") : j.nodes();
     }},
    {"NTasks", 8, Align::kRight,
     [](const v1::Job&, Step s, auto) {
       return s != nullptr ? std::to_string(s->tasks()) : std::string();
     }},
    {"AllocCPUS", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return std::to_string(Cpus(j, s)); }},
    {"AllocNodes", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return std::to_string(s != nullptr ? StepNodeCount(*s) : j.spec().nodes());
     }},
    {"AllocTRES", 30, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       const v1::JobSpec& spec = j.spec();
       const int nodes = s != nullptr ? StepNodeCount(*s) : spec.nodes();
       std::string tres = fmt::format("cpu={}", Cpus(j, s));
       if (spec.gpus_per_node() > 0)
         tres += fmt::format(",gres/gpu={}", spec.gpus_per_node() * nodes);
       if (spec.memory_mb() > 0) tres += fmt::format(",mem={}M", spec.memory_mb() * nodes);
       return tres + fmt::format(",node={}", nodes);
     }},
    {"ReqMem", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return JobOnly(j.spec().memory_mb() > 0 ? fmt::format("{}M", j.spec().memory_mb()) : "0", s);
     }},
    {"MaxRSS", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return FormatMaxRss(s != nullptr ? s->max_rss_kb() : j.max_rss_kb());
     }},
    {"TotalCPU", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       const std::int64_t ms = s != nullptr ? s->total_cpu_ms() : j.total_cpu_ms();
       return ms > 0 ? FormatCpuTime(ms) : std::string("00:00:00");
     }},
    {"AveRSS", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return FormatMaxRss(s != nullptr ? s->ave_rss_kb() : j.ave_rss_kb());
     }},
    {"AveCPU", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       const std::int64_t ms = s != nullptr ? s->ave_cpu_ms() : j.ave_cpu_ms();
       return ms > 0 ? FormatCpuTime(ms) : std::string("00:00:00");
     }},
    {"TRESUsageInAve", 40, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr ? TresIn(*s, Usage::kAve) : TresIn(j, Usage::kAve);
     }},
    {"TRESUsageInMax", 40, Align::kLeft,
     [](const v1::Job& j, Step s, auto) {
       return s != nullptr ? TresIn(*s, Usage::kMax) : TresIn(j, Usage::kMax);
     }},
    {"Reason", 20, Align::kLeft,
     [](const v1::Job& j, Step s, auto) { return s != nullptr ? s->reason() : j.reason(); }},
    {"Priority", 10, Align::kRight,
     [](const v1::Job& j, Step s, auto) { return JobOnly(std::to_string(j.priority()), s); }},
    {"Restarts", 8, Align::kRight,
     [](const v1::Job& j, Step s, auto) {
       return JobOnly(std::to_string(std::max(j.attempt() - 1, 0)), s);
     }},
    {"WorkDir", 20, Align::kLeft,
     [](const v1::Job& j, Step s, auto) { return JobOnly(j.spec().work_dir(), s); }},
};

}  // namespace

absl::StatusOr<std::vector<AccountingColumn>> ParseAccountingFields(std::string_view list) {
  std::vector<AccountingColumn> columns;
  for (const std::string_view item : CommaList(list)) {
    const std::size_t percent = item.find('%');
    const std::string_view name = item.substr(0, percent);
    AccountingColumn column;
    for (const AccountingField& f : kFields) {
      if (EqualsIgnoreCase(f.name, name)) column.field = &f;
    }
    // As Slurm's sacct: a field may be shortened to a prefix, which names
    // the first field of the table it begins (job: JobID).
    for (const AccountingField& f : kFields) {
      if (column.field != nullptr || name.empty() || name.size() > f.name.size()) continue;
      if (EqualsIgnoreCase(f.name.substr(0, name.size()), name)) column.field = &f;
    }
    if (column.field == nullptr) {
      return absl::InvalidArgumentError(fmt::format("--format: no field {}; fields (any case): {}",
                                                    name, fmt::join(AccountingFieldNames(), ",")));
    }
    column.width = column.field->width;
    if (percent != std::string_view::npos) {
      const std::string_view digits = item.substr(percent + 1);
      int width = 0;
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), width);
      if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
          width < 1 || width > 1000) {
        return absl::InvalidArgumentError(fmt::format(
            "--format: {}: write FIELD%WIDTH with a width from 1 to 1000, such as State%20", item));
      }
      column.width = width;
    }
    columns.push_back(column);
  }
  if (columns.empty()) {
    return absl::InvalidArgumentError("--format is empty; name fields such as JobID,State");
  }
  return columns;
}

std::vector<std::string> AccountingHeader(const std::vector<AccountingColumn>& columns) {
  std::vector<std::string> header;
  for (const AccountingColumn& c : columns) header.emplace_back(c.field->name);
  return header;
}

std::vector<std::string> AccountingRow(const std::vector<AccountingColumn>& columns,
                                       const v1::Job& job, const v1::JobStep* step,
                                       std::int64_t now_ms) {
  std::vector<std::string> row;
  for (const AccountingColumn& c : columns) row.push_back(c.field->value(job, step, now_ms));
  return row;
}

std::vector<std::vector<std::string>> PastAttemptRows(const std::vector<AccountingColumn>& columns,
                                                      const v1::Job& job,
                                                      const v1::JobAttempt& attempt,
                                                      std::int64_t now_ms, bool job_only) {
  v1::Job view = job;
  view.clear_past_attempts();
  view.clear_steps();
  view.set_start_time_ms(attempt.start_time_ms());
  view.set_end_time_ms(attempt.end_time_ms());
  view.set_nodes(attempt.nodes());
  view.set_exit_code(attempt.exit_code());
  view.set_exit_signal(attempt.exit_signal());
  view.set_attempt(attempt.attempt());
  view.set_reason(attempt.reason());
  view.set_state(attempt.state() == "NODE_FAIL" ? v1::JOB_NODE_FAIL : v1::JOB_CANCELLED);
  std::vector<std::vector<std::string>> rows;
  rows.push_back(AccountingRow(columns, view, nullptr, now_ms));
  // The job line's state is the attempt's own (REQUEUED and PREEMPTED are
  // no state a job is in now).
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].field->name == "State") rows.back()[i] = attempt.state();
  }
  if (job_only) return rows;
  for (const v1::JobStep& step : attempt.steps()) {
    rows.push_back(AccountingRow(columns, view, &step, now_ms));
  }
  return rows;
}

void PrintAccountingTable(const std::vector<AccountingColumn>& columns,
                          const std::vector<std::vector<std::string>>& rows, TableHeader header,
                          std::ostream& out) {
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < columns.size() && i < row.size(); ++i) {
      const auto width = static_cast<std::size_t>(columns[i].width);
      std::string cell = row[i];
      if (cell.size() > width) cell = cell.substr(0, width - 1) + "+";
      line += columns[i].field->align == Align::kLeft ? fmt::format("{:<{}} ", cell, width)
                                                      : fmt::format("{:>{}} ", cell, width);
    }
    out << line << '\n';
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    print(rows[r]);
    if (r == 0 && header == TableHeader::kWith) {
      std::vector<std::string> dashes;
      for (const AccountingColumn& c : columns) {
        dashes.emplace_back(static_cast<std::size_t>(c.width), '-');
      }
      print(dashes);
    }
  }
}

std::vector<std::string_view> AccountingFieldNames() {
  std::vector<std::string_view> names;
  for (const AccountingField& f : kFields) names.push_back(f.name);
  return names;
}

}  // namespace cohort::cli
