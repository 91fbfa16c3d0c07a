// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cctype>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "commands.h"
#include "controller_client.h"
#include "job_format.h"
#include "policy_format.h"

namespace cohort::cli {
namespace {

struct QueueOptions {
  ConnectionOptions connection;
  std::string user;
  bool all = false;
  bool me = false;
  std::string states;
  std::string format;
  bool json = false;
  bool no_header = false;
  bool start = false;
  bool steps = false;
};

// squeue -s: the listed jobs' steps, one a line.
void PrintSteps(const std::vector<v1::Job>& jobs, const QueueOptions& o, std::int64_t now) {
  if (o.json) {
    nlohmann::ordered_json out;
    out["steps"] = nlohmann::ordered_json::array();
    for (const v1::Job& job : jobs) {
      for (const v1::JobStep& step : job.steps()) out["steps"].push_back(StepToJson(job, step, now));
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::vector<std::vector<std::string>> rows;
  if (!o.no_header) {
    rows.push_back({"STEPID", "NAME", "STATE", "USER", "TIME", "NODES", "TASKS", "EXITCODE",
                    "MAXRSS", "TOTALCPU", "NODELIST"});
  }
  for (const v1::Job& job : jobs) {
    for (const v1::JobStep& step : job.steps()) {
      rows.push_back({StepDisplayId(job, step),
                      step.step_id() < 0 ? std::string("batch") : job.spec().name(),
                      step.state(), JobUser(job), FormatElapsed(StepElapsedSeconds(step, now)),
                      std::to_string(StepNodeCount(step)), std::to_string(step.tasks()),
                      fmt::format("{}:{}", step.exit_code(), step.exit_signal()),
                      FormatMaxRss(step.max_rss_kb()), FormatCpuTime(step.total_cpu_ms()),
                      step.nodes()});
    }
  }
  PrintColumns(rows, std::cout);
}

// squeue's format fields that Cohort has.
struct Field {
  char letter;
  std::string_view header;
  std::string_view meaning;
  std::function<std::string(const v1::Job&, std::int64_t now_ms)> value;
};

std::string NodesOrReason(const v1::Job& job) {
  if (job.state() != v1::JOB_PENDING && !job.nodes().empty()) return job.nodes();
  return fmt::format("({})", job.reason().empty() ? "None" : job.reason());
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {'i', "JOBID", "job id (12, 12_3, 12_[5-99])",
       [](const v1::Job& j, auto) { return JobDisplayId(j); }},
      {'A', "JOBID", "numeric job id",
       [](const v1::Job& j, auto) { return std::to_string(j.id()); }},
      {'F', "ARRAY_JOB_ID", "array id",
       [](const v1::Job& j, auto) {
         return std::to_string(j.array_job_id() > 0 ? j.array_job_id() : j.id());
       }},
      {'K', "ARRAY_TASK_ID", "array task",
       [](const v1::Job& j, auto) {
         if (j.array_job_id() <= 0) return std::string("N/A");
         return j.array_task_id() >= 0 ? std::to_string(j.array_task_id()) : j.array_pending();
       }},
      {'j', "NAME", "name", [](const v1::Job& j, auto) { return j.spec().name(); }},
      {'u', "USER", "user", [](const v1::Job& j, auto) { return JobUser(j); }},
      {'a', "ACCOUNT", "account", [](const v1::Job& j, auto) { return j.spec().account(); }},
      {'P', "PARTITION", "partition", [](const v1::Job& j, auto) { return j.spec().partition(); }},
      {'T', "STATE", "state",
       [](const v1::Job& j, auto) { return std::string(JobStateName(j.state())); }},
      {'t', "ST", "short state",
       [](const v1::Job& j, auto) { return std::string(JobStateCode(j.state())); }},
      {'M', "TIME", "time used",
       [](const v1::Job& j, std::int64_t now) { return FormatElapsed(TimeUsedSeconds(j, now)); }},
      {'l', "TIME_LIMIT", "time limit",
       [](const v1::Job& j, auto) { return FormatLimit(j.time_limit_s()); }},
      {'D', "NODES", "node count",
       [](const v1::Job& j, auto) { return std::to_string(j.spec().nodes()); }},
      {'R', "NODELIST(REASON)", "nodes or (pending reason)",
       [](const v1::Job& j, auto) { return NodesOrReason(j); }},
      {'N', "NODELIST", "nodes", [](const v1::Job& j, auto) { return j.nodes(); }},
      {'r', "REASON", "pending reason", [](const v1::Job& j, auto) { return j.reason(); }},
      {'Q', "POSITION", "queue position",
       [](const v1::Job& j, auto) {
         return j.queue_position() > 0 ? std::to_string(j.queue_position()) : std::string("-");
       }},
      {'V', "SUBMIT_TIME", "submit time",
       [](const v1::Job& j, auto) { return FormatTimestamp(j.submit_time_ms()); }},
      {'S', "START_TIME", "start time (pending: expected)",
       [](const v1::Job& j, auto) {
         return j.state() == v1::JOB_PENDING ? ExpectedStartCell(j)
                                             : FormatTimestamp(j.start_time_ms());
       }},
      {'q', "QOS", "QOS", [](const v1::Job& j, auto) { return j.qos(); }},
      {'p', "PRIORITY", "priority",
       [](const v1::Job& j, auto) { return std::to_string(j.priority()); }},
      {'e', "END_TIME", "end time",
       [](const v1::Job& j, auto) { return FormatTimestamp(j.end_time_ms()); }},
  };
  return fields;
}

// One piece of a --format: literal text, or a field with squeue's
// `%[.][width]X` (a `.` right-aligns; a width pads and cuts).
struct Segment {
  std::string literal;
  const Field* field = nullptr;
  bool right = false;
  std::size_t width = 0;
};

absl::StatusOr<std::vector<Segment>> ParseFormat(std::string_view format) {
  std::vector<Segment> segments;
  std::string literal;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      literal += format[i];
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      literal += '%';
      ++i;
      continue;
    }
    Segment s;
    std::size_t j = i + 1;
    if (j < format.size() && format[j] == '.') {
      s.right = true;
      ++j;
    }
    while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j])) != 0) {
      s.width = s.width * 10 + static_cast<std::size_t>(format[j] - '0');
      if (s.width > 1000) s.width = 1000;
      ++j;
    }
    const char letter = j < format.size() ? format[j] : '\0';
    for (const Field& f : Fields()) {
      if (f.letter == letter) s.field = &f;
    }
    if (s.field == nullptr) {
      std::vector<std::string> known;
      for (const Field& f : Fields()) known.push_back(fmt::format("%{} {}", f.letter, f.meaning));
      return absl::InvalidArgumentError(fmt::format(
          "--format: no field {} at position {}; fields: {}; %.10i right-aligns in 10 columns",
          letter == '\0' ? std::string("at the end") : fmt::format("%{}", letter), i + 1,
          fmt::join(known, ", ")));
    }
    if (!literal.empty()) segments.push_back({std::move(literal)});
    literal.clear();
    segments.push_back(s);
    i = j;
  }
  if (!literal.empty()) segments.push_back({std::move(literal)});
  return segments;
}

std::string Cell(const Segment& s, std::string text) {
  if (s.width == 0) return text;
  if (text.size() > s.width) text.resize(s.width);
  return s.right ? fmt::format("{:>{}}", text, s.width) : fmt::format("{:<{}}", text, s.width);
}

void PrintFormatted(const std::vector<Segment>& segments, const std::vector<v1::Job>& jobs,
                    bool header, std::int64_t now) {
  if (header) {
    std::string line;
    for (const Segment& s : segments) {
      line += s.field == nullptr ? s.literal : Cell(s, std::string(s.field->header));
    }
    std::cout << line << '\n';
  }
  for (const v1::Job& job : jobs) {
    std::string line;
    for (const Segment& s : segments) {
      line += s.field == nullptr ? s.literal : Cell(s, s.field->value(job, now));
    }
    std::cout << line << '\n';
  }
}

// The default table (and --start's): columns as wide as their widest cell.
void PrintTable(std::string_view columns, const std::vector<v1::Job>& jobs, bool header,
                std::int64_t now) {
  std::vector<const Field*> fields;
  for (const char c : columns) {
    for (const Field& f : Fields()) {
      if (f.letter == c) fields.push_back(&f);
    }
  }
  std::vector<std::vector<std::string>> rows;
  if (header) {
    std::vector<std::string>& row = rows.emplace_back();
    for (const Field* f : fields) row.emplace_back(f->header);
  }
  for (const v1::Job& job : jobs) {
    std::vector<std::string>& row = rows.emplace_back();
    for (const Field* f : fields) row.push_back(f->value(job, now));
  }
  PrintColumns(rows, std::cout);
}

int Queue(const QueueOptions& o) {
  v1::ListJobsRequest request;
  if (o.me && (o.all || !o.user.empty())) {
    std::cerr << "cohort: queue: --me contradicts --all and --user; give one of them\n";
    return 2;
  }
  request.set_all_users(!o.me);
  request.set_user_name(o.user);
  // --start lists the pending jobs, as squeue --start.
  if (o.start && o.states.empty()) request.add_states(v1::JOB_PENDING);
  if (!o.states.empty()) {
    std::size_t start = 0;
    while (start <= o.states.size()) {
      const std::size_t stop = std::min(o.states.find(',', start), o.states.size());
      const std::string word = o.states.substr(start, stop - start);
      start = stop + 1;
      if (word.empty()) continue;
      if (EqualsIgnoreCase(word, "all")) {
        for (const v1::JobState s :
             {v1::JOB_PENDING, v1::JOB_RUNNING, v1::JOB_COMPLETING, v1::JOB_COMPLETED,
              v1::JOB_FAILED, v1::JOB_CANCELLED, v1::JOB_TIMEOUT, v1::JOB_NODE_FAIL}) {
          request.add_states(s);
        }
        continue;
      }
      const std::optional<v1::JobState> state = ParseJobState(word);
      if (!state) {
        std::cerr << fmt::format(
            "cohort: --state: no state {}; states: PENDING (PD), RUNNING (R), COMPLETING (CG), "
            "COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF), or all\n",
            word);
        return 2;
      }
      request.add_states(*state);
    }
  }
  std::vector<Segment> segments;
  if (!o.format.empty()) {
    absl::StatusOr<std::vector<Segment>> parsed = ParseFormat(o.format);
    if (!parsed.ok()) {
      std::cerr << fmt::format("cohort: {}\n", parsed.status());
      return 2;
    }
    segments = *std::move(parsed);
  }

  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListJobsResponse> response = client.ListJobs(request);
    if (!response.ok()) return response.status();
    std::vector<v1::Job> jobs;
    for (const v1::Job& job : response->jobs()) {
      if (!o.start || job.state() == v1::JOB_PENDING) jobs.push_back(job);
    }
    std::sort(jobs.begin(), jobs.end(), DisplayOrder);
    if (o.start) {
      // Soonest first; unknown starts last.
      std::stable_sort(jobs.begin(), jobs.end(), [](const v1::Job& a, const v1::Job& b) {
        const bool a_known = a.expected_start_ms() > 0;
        const bool b_known = b.expected_start_ms() > 0;
        if (a_known != b_known) return a_known;
        return a.expected_start_ms() < b.expected_start_ms();
      });
    }
    const std::int64_t now = NowMs();
    if (o.steps) {
      PrintSteps(jobs, o, now);
    } else if (o.json) {
      nlohmann::ordered_json out;
      out["jobs"] = nlohmann::ordered_json::array();
      for (const v1::Job& job : jobs) out["jobs"].push_back(JobToJson(job, now));
      std::cout << out.dump(2) << '\n';
    } else if (!segments.empty()) {
      PrintFormatted(segments, jobs, !o.no_header, now);
    } else {
      PrintTable(o.start ? "iPjutSDR" : "iPjuTMlDR", jobs, !o.no_header, now);
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddQueueCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<QueueOptions>();
  CLI::App* queue = app.add_subcommand(
      "queue", "list pending and running jobs, in order of job id (like squeue)");
  queue->add_option("-u,--user", o->user, "only this user's jobs (a login name)");
  queue->add_flag("-a,--all", o->all, "every user's jobs (the default)");
  queue->add_flag("--me", o->me, "only your jobs");
  queue->add_option("-t,--state", o->states,
                    "only jobs in these states, comma separated: PENDING (PD), RUNNING (R), "
                    "COMPLETING (CG), COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), "
                    "NODE_FAIL (NF), or all (default: PENDING,RUNNING,COMPLETING)");
  queue->add_option("-o,--format", o->format,
                    "squeue-like fields: %i id (12, 12_3), %A numeric id, %F array id, %K array "
                    "task, %j name, %u user, %a account, %P partition, %q QOS, %p priority, %T "
                    "state, %t short state, %M time used, %l time limit, %D nodes, %R nodes or "
                    "(reason), %N nodes, %r reason, %Q queue position, %V/%S/%e submit/start "
                    "(pending: expected)/end time; %.10i right-aligns in 10 columns, %10i "
                    "left-aligns");
  queue->add_flag("--start", o->start,
                  "pending jobs with their expected start from the backfill plan (N/A: not "
                  "known yet), soonest first (like squeue --start)");
  queue->add_flag("-s,--steps", o->steps,
                  "the listed jobs' steps instead, one a line: ID.batch, ID.0, ... with their "
                  "state, time, nodes, tasks and exit code (like squeue -s)");
  queue->add_flag("--noheader", o->no_header, "leave out the header line");
  queue->add_flag("--json", o->json, "print {\"jobs\": [...]} as JSON");
  AddConnectionOptions(*queue, o->connection);
  queue->callback([o, &exit_code] { exit_code = Queue(*o); });
}

}  // namespace cohort::cli
