// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "commands/commands.h"
#include "commands/reservation_command.h"
#include "format/job_format.h"
#include "spec/job_options.h"
#include "spec/job_ref.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct ShowOptions {
  ConnectionOptions connection;
  std::string id;
  std::string node;
  bool json = false;
  bool ranks = false;
  bool whole_array = false;  ///< scontrol: an array's id shows every task of it
};

// --ranks: where each rank runs, one a line.
void PrintRanks(const v1::Job& job) {
  if (job.ranks().empty()) {
    std::cout << (job.state() == v1::JOB_RUNNING ? "no rank has reported its binding yet\n"
                                                 : "ranks are listed while the job runs\n");
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"RANK", "NODE", "GPUS", "CPUS", "NUMA", "NICS"}};
  for (const v1::RankBinding& r : job.ranks()) {
    rows.push_back({std::to_string(r.rank()), r.node(), r.gpus().empty() ? "-" : r.gpus(),
                    r.cpus().empty() ? "(not bound)" : r.cpus(),
                    r.numa() < 0 ? "-" : std::to_string(r.numa()),
                    r.nics().empty() ? "-" : r.nics()});
  }
  PrintColumns(rows, std::cout);
}

nlohmann::ordered_json RanksToJson(const v1::Job& job) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const v1::RankBinding& r : job.ranks()) {
    ranks.push_back({{"rank", r.rank()},
                     {"node", r.node()},
                     {"gpus", r.gpus()},
                     {"cpus", r.cpus()},
                     {"numa", r.numa()},
                     {"nics", r.nics()}});
  }
  return ranks;
}

std::string OrNull(const std::string& value) { return value.empty() ? "(null)" : value; }
std::string YesNo(bool value) { return value ? "YES" : "NO"; }

// Each time the job was preempted, oldest first, and the end of its grace
// time while it is being preempted.
void PrintPreemptions(const v1::Job& job, std::int64_t now) {
  if (job.preempt_deadline_ms() > 0) {
    std::cout << fmt::format("   PreemptDeadline={} (in {})\n",
                             FormatTimestamp(job.preempt_deadline_ms()),
                             FormatElapsed((job.preempt_deadline_ms() - now) / 1000));
  }
  if (job.preemptions().empty()) return;
  std::cout << fmt::format("   Preemptions={}\n", job.preemptions_size());
  for (const v1::Preemption& p : job.preemptions()) {
    std::cout << fmt::format(
        "     Time={} By={} Mode={} Attempt={} Signal={} Grace={}s{}\n",
        FormatTimestamp(p.time_ms()),
        p.by_display_id().empty() ? std::to_string(p.by_job()) : p.by_display_id(),
        OrNull(p.mode()), p.attempt(), p.signal() > 0 ? SignalName(p.signal()) : "(none)",
        p.grace_s(), p.detail().empty() ? "" : " Detail=" + p.detail());
  }
}

// The attempts a requeue ended, oldest first: when, where, and why.
void PrintPastAttempts(const v1::Job& job) {
  if (job.past_attempts().empty()) return;
  std::cout << fmt::format("   PastAttempts={}\n", job.past_attempts_size());
  for (const v1::JobAttempt& a : job.past_attempts()) {
    std::cout << fmt::format(
        "     Attempt={} State={} StartTime={} EndTime={} NodeList={} Reason={}\n", a.attempt(),
        a.state(), FormatTimestamp(a.start_time_ms()), FormatTimestamp(a.end_time_ms()),
        OrNull(a.nodes()), OrNull(a.reason()));
  }
}

// The repairs of its gang from spares, oldest first.
void PrintRepairs(const v1::Job& job) {
  if (job.repairs().empty()) return;
  std::cout << fmt::format("   Repairs={}\n", job.repairs_size());
  for (const v1::Repair& r : job.repairs()) {
    std::cout << fmt::format(
        "     Time={} Lost={} Replacement={} NodeRanks={} Attempt={} Restarted={} "
        "Reason={}\n",
        FormatTimestamp(r.time_ms()), fmt::join(r.lost(), ","), fmt::join(r.replacement(), ","),
        fmt::join(r.node_ranks(), ","), r.attempt(), OrNull(r.restarted()), OrNull(r.reason()));
  }
}

// The job's steps, the batch step first, one a line.
void PrintSteps(const v1::Job& job, std::int64_t now) {
  if (job.steps().empty()) return;
  std::cout << fmt::format("   Steps={}\n", job.steps_size());
  for (const v1::JobStep& step : job.steps()) {
    std::cout << fmt::format(
        "     StepId={} State={} NodeList={} Tasks={} Elapsed={} ExitCode={}:{} MaxRSS={} "
        "TotalCPU={}{}\n",
        StepDisplayId(job, step), step.state(), step.nodes(), step.tasks(),
        FormatElapsed(StepElapsedSeconds(step, now)), step.exit_code(), step.exit_signal(),
        OrNull(FormatMaxRss(step.max_rss_kb())), FormatCpuTime(step.total_cpu_ms()),
        step.reason().empty() ? "" : " Reason=" + step.reason());
  }
}

// As scontrol show job: `Key=Value` words, a few related ones a line.
void PrintJob(const v1::Job& job, std::int64_t now) {
  const v1::JobSpec& spec = job.spec();
  std::vector<std::string> argv;
  for (const std::string& word : spec.argv()) argv.push_back(ShellQuote(word));
  std::string switches = "(null)";
  if (spec.switches() > 0) {
    switches = std::to_string(spec.switches());
    if (spec.switches_wait_s() > 0) switches += "@" + FormatLimit(spec.switches_wait_s());
  }
  std::string array;
  if (job.array_job_id() > 0) {
    array = fmt::format(" ArrayJobId={} ArrayTaskId={}", job.array_job_id(),
                        job.array_task_id() >= 0 ? std::to_string(job.array_task_id())
                                                 : OrNull(job.array_pending()));
  }
  std::cout << fmt::format("JobId={}{} JobName={}\n", job.id(), array, spec.name());
  std::cout << fmt::format("   UserId={}({}) Account={} Partition={}\n", JobUser(job), job.uid(),
                           OrNull(spec.account()), OrNull(spec.partition()));
  std::cout << fmt::format(
      "   JobState={} Reason={} Attempt={}{}\n", JobStateName(job),
      job.reason().empty() ? "None" : job.reason(), job.attempt(),
      job.queue_position() > 0 ? fmt::format(" QueuePosition={}", job.queue_position()) : "");
  if (!job.reason_detail().empty()) {
    std::cout << fmt::format("   ReasonDetail={}\n", job.reason_detail());
  }
  std::cout << fmt::format("   Priority={} QOS={} Held={} Suspended={}\n", job.priority(),
                           OrNull(job.qos().empty() ? spec.qos() : job.qos()), YesNo(job.held()),
                           YesNo(job.suspended()));
  std::cout << fmt::format("   Dependency={} KillOnInvalidDep={}\n", OrNull(job.dependency()),
                           YesNo(spec.kill_on_invalid_dep()));
  if (job.state() == v1::JOB_PENDING && job.expected_start_ms() > 0) {
    std::cout << fmt::format("   ExpectedStart={}\n", FormatTimestamp(job.expected_start_ms()));
  }
  if (!job.image_status().empty()) {
    std::cout << fmt::format("   ImageAhead={}\n", job.image_status());
  }
  std::cout << fmt::format("   ExitCode={}:{}\n", job.exit_code(), job.exit_signal());
  std::cout << fmt::format("   RunTime={} TimeLimit={} Signal={}\n",
                           FormatElapsed(TimeUsedSeconds(job, now)),
                           FormatLimit(job.time_limit_s()), FormatWarning(spec));
  std::cout << fmt::format(
      "   SubmitTime={} StartTime={} EndTime={}\n", FormatTimestamp(job.submit_time_ms()),
      FormatTimestamp(job.start_time_ms()), FormatTimestamp(job.end_time_ms()));
  std::cout << fmt::format("   NumNodes={} NodeList={} Leaves={}\n", spec.nodes(),
                           OrNull(job.nodes()), OrNull(job.leaves()));
  std::cout << fmt::format("   NtasksPerNode={} CpusPerTask={} GpusPerNode={} MemPerNode={}\n",
                           spec.tasks_per_node(), spec.cpus_per_task(), spec.gpus_per_node(),
                           spec.memory_mb() > 0 ? fmt::format("{}M", spec.memory_mb()) : "(null)");
  std::cout << fmt::format("   Exclusive={} Requeue={} Restarts={} Switches={}\n",
                           spec.exclusive_topo() ? "TOPO" : YesNo(spec.exclusive()),
                           YesNo(spec.requeue()), std::max(job.attempt() - 1, 0), switches);
  if (spec.spares() > 0 || !job.repairs().empty()) {
    std::cout << fmt::format("   Spares={} SpareNodes={} RestartPolicy={}\n", spec.spares(),
                             OrNull(job.spare_nodes()),
                             spec.restart_policy().empty() ? "job" : spec.restart_policy());
  }
  if (spec.segment() > 0) {
    std::cout << fmt::format("   Segment={} SpreadSegments={}\n", spec.segment(),
                             YesNo(spec.spread_segments()));
  }
  if (const v1::PlacementReport& p = job.placement(); !p.summary().empty()) {
    std::cout << fmt::format(
        "   Blocks={} WorstHops={} RankOrder={}\n",
        p.blocks().empty() ? std::string("(null)") : fmt::format("{}", fmt::join(p.blocks(), ",")),
        p.worst_hops(), OrNull(p.rank_order()));
    std::cout << fmt::format("   Placement={}\n", p.summary());
  }
  if (!job.imex_channels().empty()) {
    std::cout << fmt::format("   ImexChannels={}\n", fmt::join(job.imex_channels(), ","));
  }
  std::cout << fmt::format("   Features={} ReqNodeList={} ExcNodeList={}\n",
                           spec.features().empty()
                               ? std::string("(null)")
                               : fmt::format("{}", fmt::join(spec.features(), ",")),
                           OrNull(spec.nodelist()), OrNull(spec.exclude()));
  if (!spec.gpu_type().empty()) std::cout << fmt::format("   GpuType={}\n", spec.gpu_type());
  // pyxis's options, for the job's steps (its batch script runs on the host).
  if (const v1::ContainerSpec& c = spec.container(); !c.image().empty() || !c.name().empty()) {
    std::cout << fmt::format("   ContainerImage={} ContainerName={} ContainerMounts={}\n",
                             OrNull(c.image()), OrNull(c.name()), OrNull(c.mounts()));
  }
  if (spec.begin_time_s() > 0 || spec.deadline_s() > 0) {
    std::cout << fmt::format(
        "   BeginTime={} Deadline={}\n", FormatTimestamp(spec.begin_time_s() * 1000),
        spec.deadline_s() > 0 ? FormatTimestamp(spec.deadline_s() * 1000) : std::string("N/A"));
  }
  std::cout << fmt::format("   Comment={} WCKey={} MailType={} MailUser={}\n",
                           OrNull(spec.comment()), OrNull(spec.wckey()), OrNull(spec.mail_type()),
                           OrNull(spec.mail_user()));
  std::cout << fmt::format("   Command={}\n", fmt::join(argv, " "));
  std::cout << fmt::format("   BatchScript={}\n", YesNo(!spec.script().empty()));
  std::cout << fmt::format("   WorkDir={}\n", OrNull(spec.work_dir()));
  std::cout << fmt::format("   SubmitDir={}\n", OrNull(spec.submit_dir()));
  std::cout << fmt::format("   StdOut={}\n",
                           spec.output().empty() ? std::string("cohort-%j.out") : spec.output());
  std::cout << fmt::format(
      "   StdErr={}\n", spec.error().empty()
                            ? (spec.output().empty() ? std::string("cohort-%j.out") : spec.output())
                            : spec.error());
  std::cout << fmt::format("   Environment={} variables\n", spec.env_size());
  PrintPreemptions(job, now);
  PrintRepairs(job);
  PrintPastAttempts(job);
  PrintSteps(job, now);
}

void PrintNode(const v1::Node& node) {
  std::cout << fmt::format("NodeName={} State={}\n", node.name(), NodeStateName(node.state()));
  if (!node.reason().empty()) {
    std::cout << fmt::format("   Reason={}{}\n", node.reason(), ReasonStamp(node));
  }
  std::cout << fmt::format("   CPUAlloc={} CPUTot={}\n", node.cpus_allocated(), node.cpus());
  std::cout << fmt::format("   GpuAlloc={} GpuTot={}\n", node.gpus_allocated(), node.gpus());
  std::cout << fmt::format("   AllocMem={} RealMemory={}\n", node.memory_allocated_mb(),
                           node.memory_mb());
  std::cout << fmt::format(
      "   Partitions={} Features={}\n",
      node.partitions().empty() ? std::string("(null)")
                                : fmt::format("{}", fmt::join(node.partitions(), ",")),
      node.features().empty() ? std::string("(null)")
                              : fmt::format("{}", fmt::join(node.features(), ",")));
  std::cout << fmt::format("   Leaf={} Block={}\n", OrNull(node.leaf()), OrNull(node.block()));
  std::cout << fmt::format("   Jobs={}\n", node.jobs().empty()
                                               ? std::string("(null)")
                                               : fmt::format("{}", fmt::join(node.jobs(), ",")));
}

// Every job the controller still knows, in any state (finished ones until
// it forgets them, as Slurm's MinJobAge), that `keep` wants, in order.
absl::StatusOr<std::vector<v1::Job>> KnownJobs(ControllerClient& client,
                                               const std::function<bool(const v1::Job&)>& keep) {
  v1::ListJobsRequest request;
  request.set_all_users(true);
  for (const v1::JobState s :
       {v1::JOB_PENDING, v1::JOB_RUNNING, v1::JOB_COMPLETING, v1::JOB_COMPLETED, v1::JOB_FAILED,
        v1::JOB_CANCELLED, v1::JOB_TIMEOUT, v1::JOB_NODE_FAIL}) {
    request.add_states(s);
  }
  absl::StatusOr<v1::ListJobsResponse> response = client.ListJobs(request);
  if (!response.ok()) return response.status();
  std::vector<v1::Job> jobs;
  for (const v1::Job& job : response->jobs()) {
    if (keep(job)) jobs.push_back(job);
  }
  std::sort(jobs.begin(), jobs.end(), DisplayOrder);
  return jobs;
}

void PrintJobs(const std::vector<v1::Job>& jobs) {
  const std::int64_t now = NowMs();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (i > 0) std::cout << '\n';
    PrintJob(jobs[i], now);
  }
}

int ShowJob(const ShowOptions& o) {
  absl::StatusOr<JobRef> ref = ParseJobRef(o.id, "show job");
  if (!ref.ok()) {
    std::cerr << fmt::format("cohort: {}\n", ref.status());
    return 2;
  }
  // job_ref wins when set; job_id says the same for a plain id.
  v1::GetJobRequest request;
  request.set_job_ref(FormatJobRef(*ref));
  if (ref->task < 0) request.set_job_id(ref->job);
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::GetJobResponse> response = client.GetJob(request);
    if (!response.ok()) return response.status();
    const std::int64_t now = NowMs();
    const v1::Job& found = response->job();
    if (o.whole_array && ref->task < 0 && found.array_job_id() == found.id()) {
      // An array's id: each of its tasks, as Slurm's scontrol.
      absl::StatusOr<std::vector<v1::Job>> tasks = KnownJobs(
          client, [&](const v1::Job& j) { return j.array_job_id() == found.array_job_id(); });
      if (!tasks.ok()) return tasks.status();
      if (!tasks->empty()) {
        PrintJobs(*tasks);
        return absl::OkStatus();
      }
    }
    if (o.json) {
      nlohmann::ordered_json out = JobToJson(response->job(), now);
      if (o.ranks) out["ranks"] = RanksToJson(response->job());
      std::cout << out.dump(2) << '\n';
    } else if (o.ranks) {
      PrintRanks(response->job());
    } else {
      PrintJob(response->job(), now);
    }
    return absl::OkStatus();
  });
}

int ShowNode(const ShowOptions& o) {
  v1::ListNodesRequest request;
  request.set_nodes(o.node);
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListNodesResponse> response = client.ListNodes(request);
    if (!response.ok()) return response.status();
    if (response->nodes().empty()) {
      return absl::NotFoundError(fmt::format("no node {}; see cohort nodes for the names", o.node));
    }
    if (!o.json) {
      for (int i = 0; i < response->nodes_size(); ++i) {
        if (i > 0) std::cout << '\n';
        PrintNode(response->nodes(i));
      }
      return absl::OkStatus();
    }
    // The shape follows the question, not the answer: a name gives an
    // object, a hostlist a list.
    if (o.node.find_first_of("[,") == std::string::npos && response->nodes_size() == 1) {
      std::cout << NodeToJson(response->nodes(0)).dump(2) << '\n';
    } else {
      nlohmann::ordered_json out;
      out["nodes"] = nlohmann::ordered_json::array();
      for (const v1::Node& node : response->nodes()) out["nodes"].push_back(NodeToJson(node));
      std::cout << out.dump(2) << '\n';
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddShowCommand(CLI::App& app, int& exit_code) {
  CLI::App* show =
      app.add_subcommand("show", "show every detail of a job or a node (like scontrol show)");
  show->require_subcommand(1);

  auto job_options = std::make_shared<ShowOptions>();
  CLI::App* job = show->add_subcommand("job", "show a job: cohort show job JOB");
  job->add_option("JOB", job_options->id, "the job: its id (12), or an array task (12_3)")
      ->required();
  job->add_flag("--json", job_options->json, "print the job as JSON");
  job->add_flag("--ranks", job_options->ranks,
                "list each rank's node, GPUs, CPUs, NUMA node and NICs (while it runs)");
  AddConnectionOptions(*job, job_options->connection);
  job->callback([job_options, &exit_code] { exit_code = ShowJob(*job_options); });

  auto node_options = std::make_shared<ShowOptions>();
  CLI::App* node = show->add_subcommand("node", "show a node: cohort show node NAME");
  node->add_option("NAME", node_options->node,
                   "the node's name, or a hostlist such as gpu[001-004] for several")
      ->required();
  node->add_flag("--json", node_options->json,
                 "print the node as JSON (for a hostlist: {\"nodes\": [...]})");
  AddConnectionOptions(*node, node_options->connection);
  node->callback([node_options, &exit_code] { exit_code = ShowNode(*node_options); });
}

namespace {

void PrintPartition(const v1::Partition& p) {
  const auto limit = [](std::int64_t s) {
    return s == 0 ? std::string("UNLIMITED") : FormatLimit(s);
  };
  const auto list = [](const auto& items) {
    return items.empty() ? std::string("ALL") : fmt::format("{}", fmt::join(items, ","));
  };
  std::cout << fmt::format("PartitionName={}\n", p.name());
  std::cout << fmt::format("   AllowAccounts={} AllowUsers={}\n", list(p.allow_accounts()),
                           list(p.allow_users()));
  std::cout << fmt::format("   Default={} PriorityTier={}\n", YesNo(p.is_default()),
                           p.priority_tier());
  std::cout << fmt::format("   DefaultTime={} MaxNodes={} MaxTime={}\n",
                           p.default_time_s() > 0 ? FormatLimit(p.default_time_s()) : "NONE",
                           p.max_nodes() > 0 ? std::to_string(p.max_nodes()) : "UNLIMITED",
                           limit(p.max_time_s()));
  std::cout << fmt::format("   Nodes={}\n", p.nodes());
  std::cout << fmt::format("   PreemptMode={} State={} TotalCPUs={} TotalNodes={} TotalGPUs={}\n",
                           p.preempt_mode().empty() ? "(cluster's)" : p.preempt_mode(),
                           p.state().empty() ? "UP" : p.state(), p.total_cpus(), p.total_nodes(),
                           p.total_gpus());
  if (!p.state_user().empty() || p.state_time_ms() > 0) {
    std::cout << fmt::format("   StateSetBy={} StateSetAt={}\n", OrNull(p.state_user()),
                             FormatTimestamp(p.state_time_ms()));
  }
}

// scontrol show step: the running steps of every job, or of JOB, or the
// step JOB.STEP in whatever state it is, in Slurm's words.
int ShowSteps(const ShowOptions& o) {
  std::string job_part = o.id;
  std::string step_part;
  if (const std::size_t dot = o.id.find('.'); dot != std::string::npos) {
    job_part = o.id.substr(0, dot);
    step_part = o.id.substr(dot + 1);
    if (step_part.empty()) {
      std::cerr << fmt::format("scontrol: error: show step {}: write JOB.STEP (12.0, 12.batch)\n",
                               o.id);
      return 1;
    }
  }
  std::optional<JobRef> wanted;
  if (!job_part.empty()) {
    absl::StatusOr<JobRef> ref = ParseJobRef(job_part, "show step");
    if (!ref.ok()) {
      std::cerr << fmt::format("scontrol: error: {}\n", std::string(ref.status().message()));
      return 1;
    }
    wanted = *ref;
  }
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<std::vector<v1::Job>> jobs = KnownJobs(client, [&](const v1::Job& j) {
      return !wanted || j.display_id() == FormatJobRef(*wanted) ||
             (wanted->task < 0 && j.id() == wanted->job);
    });
    if (!jobs.ok()) return jobs.status();
    int shown = 0;
    for (const v1::Job& job : *jobs) {
      for (const v1::JobStep& step : job.steps()) {
        const bool named = !step_part.empty();
        if (named ? step.name() != step_part : step.state() != "RUNNING") continue;
        if (shown++ > 0) std::cout << '\n';
        std::cout << fmt::format(
            "StepId={}.{} UserId={} StartTime={} TimeLimit={}\n"
            "   State={} Partition={} NodeList={}\n"
            "   Nodes={} Tasks={} Name={}\n"
            "   ExitCode={}:{}{}\n",
            job.display_id(), step.name(), job.uid(), FormatTimestamp(step.start_time_ms()),
            job.time_limit_s() > 0 ? FormatLimit(job.time_limit_s()) : std::string("UNLIMITED"),
            step.state(), job.spec().partition(), step.nodes(),
            hostlist::Expand(step.nodes()).value_or(std::vector<std::string>{}).size(),
            step.tasks(), step.name() == "batch" ? "batch" : job.spec().name(), step.exit_code(),
            step.exit_signal(), step.reason().empty() ? "" : " Reason=" + step.reason());
      }
    }
    if (shown == 0) {
      if (!o.id.empty()) return absl::NotFoundError(fmt::format("no step {} is known", o.id));
      std::cout << "No job steps in the system\n";
    }
    return absl::OkStatus();
  });
}

// scontrol show job without a job: every job the caller may see.
int ShowAllJobs(const ShowOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<std::vector<v1::Job>> jobs =
        KnownJobs(client, [](const v1::Job&) { return true; });
    if (!jobs.ok()) return jobs.status();
    PrintJobs(*jobs);
    if (jobs->empty()) std::cout << "No jobs in the system\n";
    return absl::OkStatus();
  });
}

// scontrol -o: each record on one line. What `run` prints is taken whole:
// a record's indented lines join its first, blank lines between records go.
int OneLinePerRecord(const std::function<int()>& run) {
  std::ostringstream captured;
  std::streambuf* const saved = std::cout.rdbuf(captured.rdbuf());
  const int status = run();
  std::cout.rdbuf(saved);
  std::istringstream lines(captured.str());
  std::string line;
  std::string record;
  const auto flush = [&] {
    if (!record.empty()) std::cout << record << '\n';
    record.clear();
  };
  while (std::getline(lines, line)) {
    const std::size_t text = line.find_first_not_of(' ');
    if (text == std::string::npos) {
      flush();
    } else if (text > 0 && !record.empty()) {
      record += ' ' + line.substr(text);
    } else {
      flush();
      record = line;
    }
  }
  flush();
  return status;
}

int ShowPartitions(const ShowOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    v1::ListPartitionsRequest request;
    request.set_name(o.id);
    absl::StatusOr<v1::ListPartitionsResponse> response = client.ListPartitions(request);
    if (!response.ok()) return response.status();
    for (int i = 0; i < response->partitions_size(); ++i) {
      if (i > 0) std::cout << '\n';
      PrintPartition(response->partitions(i));
    }
    return absl::OkStatus();
  });
}

// scontrol show config: the cluster-wide settings the controller runs with,
// `Name = value` a line as Slurm prints them (tools split at " = ").
int ShowConfig(const ConnectionOptions& connection) {
  return CallController(connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::GetConfigResponse> response = client.GetConfig(v1::GetConfigRequest{});
    if (!response.ok()) return response.status();
    std::cout << fmt::format("Configuration data as of {}\n",
                             FormatTimestamp(response->as_of_ms()));
    for (const v1::ConfigEntry& entry : response->entries()) {
      std::cout << fmt::format("{:<23} = {}\n", entry.name(), entry.value());
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddScontrolShow(CLI::App& scontrol, int& exit_code) {
  CLI::App* show = scontrol.add_subcommand("show", "show jobs, nodes, partitions or hostlists");
  show->require_subcommand(1);
  auto o = std::make_shared<ShowOptions>();
  o->whole_array = true;
  auto one_line = std::make_shared<bool>(false);
  scontrol.add_flag("-o,--oneliner", *one_line, "each record of show on one line");
  // The records of show, one a line with -o.
  const auto records = [one_line](const std::function<int()>& run) {
    return *one_line ? OneLinePerRecord(run) : run();
  };
  AddConnectionOptions(*show, o->connection, ConfigShortName::kNone);
  // `jobid` and -d/-dd after it: Snakemake's `scontrol show jobid -dd 12`.
  CLI::App* job = show->add_subcommand("job", "a job, or every job")->alias("jobs")->alias("jobid");
  job->add_option("JOB", o->id,
                  "the job: 12, 12_3, or an array's 12 for each of its tasks "
                  "(default: every job the controller still knows)");
  job->add_flag("-d,--details")->description("accepted: the record is always in full");
  job->callback([o, records, &exit_code] {
    exit_code = records([&] { return o->id.empty() ? ShowAllJobs(*o) : ShowJob(*o); });
  });
  CLI::App* node = show->add_subcommand("node", "a node, or every node")->alias("nodes");
  node->add_option("NAME", o->node, "the node, or a hostlist (default: every node)");
  node->callback([o, records, &exit_code] { exit_code = records([&] { return ShowNode(*o); }); });
  CLI::App* partition =
      show->add_subcommand("partition", "a partition, or every one")->alias("partitions");
  partition->add_option("NAME", o->id, "the partition (default: every one)");
  partition->callback(
      [o, records, &exit_code] { exit_code = records([&] { return ShowPartitions(*o); }); });
  CLI::App* reservation = show->add_subcommand("reservation", "a reservation, or every one")
                              ->alias("reservations")
                              ->alias("res");
  reservation->add_option("NAME", o->id, "the reservation (default: every one)");
  reservation->callback([o, records, &exit_code] {
    exit_code = records([&] { return ShowReservations(o->connection, o->id); });
  });
  for (CLI::App* sub : {show, job, node, partition, reservation}) sub->fallthrough();
  CLI::App* step =
      show->add_subcommand("step", "a step, a job's running steps, or every one")->alias("steps");
  step->add_option("STEP", o->id,
                   "JOB.STEP (12.0, 12.batch) in any state, or JOB for its running steps "
                   "(default: every running step)");
  step->callback([o, records, &exit_code] { exit_code = records([&] { return ShowSteps(*o); }); });
  step->fallthrough();
  CLI::App* config = show->add_subcommand("config", "the cluster-wide settings in force")
                         ->alias("conf")
                         ->alias("configuration");
  config->callback([o, &exit_code] { exit_code = ShowConfig(o->connection); });
  config->fallthrough();
  auto lists = std::make_shared<std::vector<std::string>>();
  CLI::App* hostnames = show->add_subcommand("hostnames", "every name of a hostlist, one a line");
  hostnames->add_option("HOSTLIST", *lists, "default: $SLURM_JOB_NODELIST");
  hostnames->callback([lists, &exit_code] {
    if (lists->empty()) {
      const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
      if (nodelist == nullptr || *nodelist == '\0') {
        std::cerr << "scontrol: error: give a hostlist, or run inside a job (SLURM_JOB_NODELIST)\n";
        exit_code = 1;
        return;
      }
      lists->emplace_back(nodelist);
    }
    exit_code = ExpandHostlists(*lists);
  });
  auto names = std::make_shared<std::vector<std::string>>();
  CLI::App* hostlist = show->add_subcommand("hostlist", "the shortest hostlist of names");
  hostlist->add_option("NAMES", *names, "names, comma separated or one a word")->required();
  hostlist->callback([names, &exit_code] { exit_code = CompressHostlists(*names); });
}

}  // namespace cohort::cli
