// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/array_spec.h"
#include "cohort/text/hostlist.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/job_sort.h"
#include "format/percent_format.h"
#include "format/policy_format.h"
#include "transport/controller_client.h"

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
  // Client-side filters, comma separated as squeue's.
  std::string jobs;           ///< -j: ids (12, 12_3)
  std::string partitions;     ///< -p
  std::string names;          ///< -n
  std::string accounts;       ///< -A
  std::string qos;            ///< -q
  std::string nodelist;       ///< -w: a hostlist; jobs on any of its nodes
  std::string sort;           ///< -S: squeue's sort letters (-p,i)
  int iterate_s = 0;          ///< -i: print again every this many seconds; 0: once
  std::string long_format;    ///< squeue -O: Slurm's field names, turned into `format`
  bool long_listing = false;  ///< squeue -l
  bool each_task = false;     ///< squeue -r: an array's tasks not started, one a line
};

// squeue -r: each array's line of tasks not yet started (12_[5-99]) as one
// line a task (12_5 ... 12_99). A list that does not parse stays one line.
std::vector<v1::Job> OneLineATask(std::vector<v1::Job> jobs) {
  constexpr int kMaxTaskId = 4'000'001;  // Slurm's largest MaxArraySize
  std::vector<v1::Job> out;
  out.reserve(jobs.size());
  for (v1::Job& job : jobs) {
    if (job.array_job_id() <= 0 || job.array_task_id() >= 0 || job.array_pending().empty()) {
      out.push_back(std::move(job));
      continue;
    }
    const absl::StatusOr<ArraySpec> pending = ParseArraySpec(job.array_pending(), kMaxTaskId);
    if (!pending.ok()) {
      out.push_back(std::move(job));
      continue;
    }
    for (const int task : pending->tasks) {
      v1::Job& one = out.emplace_back(job);
      one.set_array_task_id(task);
      one.set_array_pending("");
      one.set_display_id(fmt::format("{}_{}", job.array_job_id(), task));
    }
  }
  return out;
}

bool Listed(const std::vector<std::string_view>& list, std::string_view value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

// Whether a job on `hostlist` runs on one of `nodes` (none: any job).
bool OnNodes(const std::string& hostlist, const std::set<std::string, std::less<>>& nodes) {
  if (nodes.empty()) return true;
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(hostlist);
  return names.ok() &&
         std::ranges::any_of(*names, [&](const std::string& name) { return nodes.contains(name); });
}

// Whether the job passes -j, -p, -n, -A and -q. A plain id also names
// every task of its array.
bool Wanted(const v1::Job& job, const QueueOptions& o) {
  const std::vector<std::string_view> jobs = CommaList(o.jobs);
  const bool job_listed =
      jobs.empty() || Listed(jobs, JobDisplayId(job)) || Listed(jobs, std::to_string(job.id())) ||
      (job.array_job_id() > 0 && Listed(jobs, std::to_string(job.array_job_id())));
  return job_listed && Listed(CommaList(o.partitions), job.spec().partition()) &&
         Listed(CommaList(o.names), job.spec().name()) &&
         Listed(CommaList(o.accounts), job.spec().account()) &&
         Listed(CommaList(o.qos), job.qos().empty() ? job.spec().qos() : job.qos());
}

// squeue -s: the listed jobs' steps, one a line.
void PrintSteps(const std::vector<v1::Job>& jobs, const QueueOptions& o, std::int64_t now) {
  if (o.json) {
    nlohmann::ordered_json out;
    out["steps"] = nlohmann::ordered_json::array();
    for (const v1::Job& job : jobs) {
      for (const v1::JobStep& step : job.steps())
        out["steps"].push_back(StepToJson(job, step, now));
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
      rows.push_back(
          {StepDisplayId(job, step), step.step_id() < 0 ? std::string("batch") : job.spec().name(),
           step.state(), JobUser(job), FormatElapsed(StepElapsedSeconds(step, now)),
           std::to_string(StepNodeCount(step)), std::to_string(step.tasks()),
           fmt::format("{}:{}", step.exit_code(), step.exit_signal()),
           FormatMaxRss(step.max_rss_kb()), FormatCpuTime(step.total_cpu_ms()), step.nodes()});
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
      {'U', "UID", "user id", [](const v1::Job& j, auto) { return std::to_string(j.uid()); }},
      {'a', "ACCOUNT", "account", [](const v1::Job& j, auto) { return j.spec().account(); }},
      {'P', "PARTITION", "partition", [](const v1::Job& j, auto) { return j.spec().partition(); }},
      {'T', "STATE", "state", [](const v1::Job& j, auto) { return std::string(JobStateName(j)); }},
      {'t', "ST", "short state",
       [](const v1::Job& j, auto) { return std::string(JobStateCode(j)); }},
      {'M', "TIME", "time used",
       [](const v1::Job& j, std::int64_t now) { return FormatElapsed(TimeUsedSeconds(j, now)); }},
      {'l', "TIME_LIMIT", "time limit",
       [](const v1::Job& j, auto) { return FormatSlurmLimit(j.time_limit_s()); }},
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

using Segment = FormatSegment<Field>;

void PrintFormatted(const std::vector<Segment>& segments, const std::vector<v1::Job>& jobs,
                    bool header, std::int64_t now) {
  if (header) {
    std::cout << FormatLine(segments, [](const Field& f) { return std::string(f.header); }) << '\n';
  }
  for (const v1::Job& job : jobs) {
    std::cout << FormatLine(segments, [&](const Field& f) { return f.value(job, now); }) << '\n';
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

// squeue -O's field names and the letters of -o that show the same.
struct LongField {
  std::string_view name;
  char letter;
};
constexpr LongField kLongFields[] = {
    {"jobid", 'i'},     {"jobarrayid", 'i'}, {"arrayjobid", 'F'},   {"arraytaskid", 'K'},
    {"name", 'j'},      {"username", 'u'},   {"userid", 'u'},       {"account", 'a'},
    {"partition", 'P'}, {"state", 'T'},      {"statecompact", 't'}, {"timeused", 'M'},
    {"timelimit", 'l'}, {"numnodes", 'D'},   {"reasonlist", 'R'},   {"nodelist", 'N'},
    {"reason", 'r'},    {"submittime", 'V'}, {"starttime", 'S'},    {"endtime", 'e'},
    {"qos", 'q'},       {"priority", 'p'},   {"prioritylong", 'p'},
};

// squeue -O / SQUEUE_FORMAT2 (`JobID,Name:30,State:.10`) as a -o format:
// each field `:[.]WIDTH` wide (default 20), left-aligned unless `.`.
absl::StatusOr<std::string> FormatOfFields(std::string_view fields) {
  std::string format;
  for (const std::string_view item : CommaList(fields)) {
    const std::size_t colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    const std::string_view width = colon == std::string_view::npos ? "20" : item.substr(colon + 1);
    const LongField* field = nullptr;
    for (const LongField& f : kLongFields) {
      if (EqualsIgnoreCase(f.name, name)) field = &f;
    }
    if (field == nullptr) {
      std::vector<std::string_view> known;
      for (const LongField& f : kLongFields) known.push_back(f.name);
      return absl::InvalidArgumentError(fmt::format(
          "-O/--Format: no field {}; fields (any case): {}", name, fmt::join(known, ",")));
    }
    format += fmt::format("%{}{} ", width, field->letter);
  }
  if (!format.empty()) format.pop_back();
  return format;
}

// One listing of Queue's.
absl::Status ListOnce(ControllerClient& client, const v1::ListJobsRequest& request,
                      const QueueOptions& o, const std::vector<SortKey>& sort_keys,
                      const std::set<std::string, std::less<>>& on_nodes,
                      const std::vector<Segment>& segments) {
  absl::StatusOr<v1::ListJobsResponse> response = client.ListJobs(request);
  if (!response.ok()) return response.status();
  std::vector<v1::Job> jobs;
  for (const v1::Job& job : response->jobs()) {
    if ((!o.start || job.state() == v1::JOB_PENDING) && Wanted(job, o) &&
        OnNodes(job.nodes(), on_nodes)) {
      jobs.push_back(job);
    }
  }
  std::sort(jobs.begin(), jobs.end(), DisplayOrder);
  if (o.each_task) jobs = OneLineATask(std::move(jobs));
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
  if (!sort_keys.empty()) SortJobs(jobs, sort_keys, now);
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
  // Jobs named by id are listed in whatever state they are, as squeue -j.
  if (!o.jobs.empty() && o.states.empty() && !o.start) {
    for (const v1::JobState s :
         {v1::JOB_PENDING, v1::JOB_RUNNING, v1::JOB_COMPLETING, v1::JOB_COMPLETED, v1::JOB_FAILED,
          v1::JOB_CANCELLED, v1::JOB_TIMEOUT, v1::JOB_NODE_FAIL}) {
      request.add_states(s);
    }
  }
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
            "cohort: -t/--state: no state {}; states: PENDING (PD), RUNNING (R), COMPLETING (CG), "
            "COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF), or all\n",
            word);
        return 2;
      }
      request.add_states(*state);
    }
  }
  std::string format = o.format;
  if (format.empty() && !o.long_format.empty()) {
    absl::StatusOr<std::string> converted = FormatOfFields(o.long_format);
    if (!converted.ok()) {
      std::cerr << fmt::format("cohort: {}\n", converted.status().message());
      return 2;
    }
    format = *std::move(converted);
  }
  std::vector<Segment> segments;
  if (!format.empty()) {
    absl::StatusOr<std::vector<Segment>> parsed =
        ParsePercentFormat(format, std::span<const Field>(Fields()));
    if (!parsed.ok()) {
      std::cerr << fmt::format("cohort: {}\n", parsed.status());
      return 2;
    }
    segments = *std::move(parsed);
  }

  absl::StatusOr<std::vector<SortKey>> sort_keys = ParseSortKeys(o.sort);
  if (!sort_keys.ok()) {
    std::cerr << fmt::format("cohort: {}\n", sort_keys.status().message());
    return 2;
  }
  std::set<std::string, std::less<>> on_nodes;
  if (!o.nodelist.empty()) {
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(o.nodelist);
    if (!names.ok()) {
      std::cerr << fmt::format("cohort: -w/--nodelist: {}\n", names.status().message());
      return 2;
    }
    on_nodes.insert(names->begin(), names->end());
  }
  if (o.iterate_s < 0) {
    std::cerr << "cohort: -i/--iterate takes the seconds between listings, 1 or more\n";
    return 2;
  }
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    // -i: the listing again every iterate_s seconds, each under the time
    // it was made, as squeue's, until interrupted.
    for (bool first = true; first || o.iterate_s > 0; first = false) {
      if (!first) std::this_thread::sleep_for(std::chrono::seconds(o.iterate_s));
      if (o.iterate_s > 0) {
        const std::time_t now = std::time(nullptr);
        char stamp[64] = {};
        std::strftime(stamp, sizeof stamp, "%a %b %e %H:%M:%S %Y", std::localtime(&now));
        std::cout << stamp << '\n';
      }
      if (absl::Status listed = ListOnce(client, request, o, *sort_keys, on_nodes, segments);
          !listed.ok()) {
        return listed;
      }
      std::cout << std::flush;
    }
    return absl::OkStatus();
  });
}

// -j, -p, -n, -A and -q, as squeue's.
void AddFilterOptions(CLI::App& command, QueueOptions& o) {
  command.add_option("-j,--jobs", o.jobs, "only these jobs, comma separated (12, 12_3)")
      ->type_name("LIST");
  command.add_option("-p,--partition", o.partitions, "only jobs of these partitions")
      ->type_name("LIST");
  command.add_option("-n,--name", o.names, "only jobs with these names")->type_name("LIST");
  command.add_option("-A,--account", o.accounts, "only jobs of these accounts")->type_name("LIST");
  command.add_option("-q,--qos", o.qos, "only jobs of these QOS")->type_name("LIST");
  command.add_option("-w,--nodelist", o.nodelist, "only jobs on some of these nodes")
      ->type_name("HOSTLIST");
  command
      .add_option("-S,--sort", o.sort,
                  "order by these format letters, each after - for descending (-S -p,i: the "
                  "highest priority first); default: by id")
      ->type_name("LETTERS");
  command
      .add_option("-i,--iterate", o.iterate_s,
                  "list again every this many seconds, each under its time, until interrupted")
      ->type_name("SECONDS");
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
                    "task, %j name, %u user, %U user id, %a account, %P partition, %q QOS, %p "
                    "priority, %T "
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
  AddFilterOptions(*queue, *o);
  AddConnectionOptions(*queue, o->connection);
  queue->callback([o, &exit_code] { exit_code = Queue(*o); });
}

void AddSqueueCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<QueueOptions>();
  app.set_help_flag("--help", "print this help and exit");  // -h is --noheader
  app.add_option("-u,--user", o->user, "only this user's jobs");
  app.add_flag("-a,--all", o->all, "every user's jobs (the default)");
  app.add_flag("--me", o->me, "only your jobs");
  app.add_option("-t,--states", o->states, "only jobs in these states (PD,R,...; all)");
  app.add_option("-o,--format", o->format,
                 "fields as %.18i %.9P %.8j %.8u %.2t %.10M %.6D %R (see cohort queue --help)");
  app.add_option("-O,--Format", o->long_format, "fields by name: JobID,Name:30,State:.10,...");
  app.add_flag("-h,--noheader", o->no_header, "leave out the header line");
  app.add_flag("-l,--long", o->long_listing, "also the state by name and the time limit");
  app.add_flag("--start", o->start, "pending jobs with their expected start");
  app.add_flag("-s,--steps", o->steps, "the jobs' steps instead");
  app.add_flag("-r,--array", o->each_task,
               "each array task not yet started on a line of its own (12_5, 12_6, ...), not as "
               "one line (12_[5-99])");
  app.add_flag("-v,--verbose")->description("accepted; prints nothing more");
  app.add_flag("--json", o->json, "print {\"jobs\": [...]} as JSON");
  AddFilterOptions(app, *o);
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.callback([o, &exit_code] {
    // As squeue: -o, else -O, else $SQUEUE_FORMAT, else $SQUEUE_FORMAT2,
    // else its default (or -l's) columns.
    if (o->format.empty() && o->long_format.empty() && !o->steps && !o->json) {
      const char* format = std::getenv("SQUEUE_FORMAT");
      const char* fields = std::getenv("SQUEUE_FORMAT2");
      if (format != nullptr && *format != '\0') {
        o->format = format;
      } else if (fields != nullptr && *fields != '\0') {
        o->long_format = fields;
      } else if (!o->start) {
        o->format = o->long_listing ? "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
                                    : "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
      }
    }
    exit_code = SlurmStatus(Queue(*o));
  });
}

}  // namespace cohort::cli
