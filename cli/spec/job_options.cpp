// SPDX-License-Identifier: Apache-2.0
#include "spec/job_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "cohort/config/cluster_config.h"
#include "cohort/container/container_options.h"
#include "cohort/container/image_ref.h"
#include "cohort/diagnostics.h"
#include "cohort/engine/job.h"
#include "cohort/fmt_absl.h"
#include "cohort/launch/binding.h"
#include "cohort/launch/resource_limits.h"
#include "cohort/text/directives.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"
#include "format/history_format.h"
#include "format/job_format.h"
#include "spec/job_option_table.h"
#include "spec/job_resources.h"
#include "transport/controller_client.h"

extern char** environ;  // NOLINT: POSIX

namespace cohort::cli {
namespace {

bool IsVariableName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())) != 0) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

bool IsFeatureName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
  });
}

std::vector<std::string_view> Split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t stop = text.find_first_of(separators, start);
    out.push_back(text.substr(start, stop - start));
    if (stop == std::string_view::npos) return out;
    start = stop + 1;
  }
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// --time in seconds. UNLIMITED (and, as in Slurm, 0) is "no limit", sent as
// kUnlimited; the controller refuses it in a partition with a MaxTime.
absl::StatusOr<std::int64_t> TimeLimitSeconds(std::string_view text) {
  absl::StatusOr<std::chrono::seconds> limit = ParseSlurmTime(text);
  if (!limit.ok()) return limit.status();
  if (*limit == kUnlimited || limit->count() == 0) return kUnlimited.count();
  return limit->count();
}

// --export: ALL (default), NONE, or a list of NAME and NAME=VALUE, which
// with ALL adds to the whole environment and without it is all that is sent.
struct ExportSpec {
  bool all = false;
  std::vector<std::string> names;             // values from this environment
  std::map<std::string, std::string> values;  // given values
};

absl::StatusOr<ExportSpec> ParseExport(std::string_view text) {
  ExportSpec spec;
  bool none = false;
  for (const std::string_view item : Split(text, ",")) {
    if (item.empty()) continue;
    if (EqualsIgnoreCase(item, "ALL")) {
      spec.all = true;
      continue;
    }
    if (EqualsIgnoreCase(item, "NONE")) {
      none = true;
      continue;
    }
    const std::size_t equals = item.find('=');
    const std::string_view name = item.substr(0, equals);
    if (!IsVariableName(name)) {
      return Invalid(fmt::format(
          "--export: \"{}\" is not a variable name; write ALL, NONE or NAME[=VALUE],... (such as "
          "ALL,OMP_NUM_THREADS=8)",
          name));
    }
    if (equals == std::string_view::npos) {
      spec.names.emplace_back(name);
    } else {
      spec.values[std::string(name)] = std::string(item.substr(equals + 1));
    }
  }
  if (spec.all && none) {
    return Invalid("--export: ALL and NONE contradict each other; give one of them");
  }
  if (!spec.all && !none && spec.names.empty() && spec.values.empty()) {
    return Invalid("--export is empty; write ALL, NONE or NAME[=VALUE],...");
  }
  return spec;
}

// The environment the ranks get, sorted by name; warns about a listed
// variable that is not set here.
std::vector<v1::EnvVar> BuildEnvironment(const ExportSpec& spec) {
  std::map<std::string, std::string> env;
  if (spec.all) {
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      const std::string_view text(*entry);
      const std::size_t equals = text.find('=');
      if (equals == std::string_view::npos || equals == 0) continue;
      env.emplace(text.substr(0, equals), text.substr(equals + 1));
    }
  }
  for (const std::string& name : spec.names) {
    if (const char* value = std::getenv(name.c_str())) {
      env[name] = value;
    } else {
      std::cerr << fmt::format("cohort: warning: --export: {} is not set here; not exported\n",
                               name);
    }
  }
  for (const auto& [name, value] : spec.values) env[name] = value;
  std::vector<v1::EnvVar> out;
  for (const auto& [name, value] : env) {
    v1::EnvVar& var = out.emplace_back();
    var.set_name(name);
    var.set_value(value);
  }
  return out;
}

// --switches=N[@TIME]: the leaf bound and the wait in seconds (0: no limit).
absl::StatusOr<std::pair<int, std::int64_t>> ParseSwitches(const std::string& text) {
  const std::size_t at = text.find('@');
  const std::optional<int> count = ParseCount(std::string_view(text).substr(0, at));
  if (!count || *count < 1) {
    return Invalid(fmt::format(
        "--switches \"{}\": write N or N@TIME with N at least 1 (such as 1, or 2@30:00 to wait "
        "up to 30 minutes for 2)",
        text));
  }
  if (at == std::string::npos) return std::pair<int, std::int64_t>{*count, 0};
  absl::StatusOr<std::chrono::seconds> wait = ParseSlurmTime(text.substr(at + 1));
  if (!wait.ok()) return Invalid(fmt::format("--switches \"{}\": {}", text, wait.status()));
  // On the wire 0 is "wait as long as it takes".
  if (*wait == kUnlimited) return std::pair<int, std::int64_t>{*count, 0};
  if (wait->count() == 0) {
    return Invalid(fmt::format(
        "--switches \"{}\": the wait must be longer than 0; leave out @TIME to wait as long as "
        "it takes",
        text));
  }
  return std::pair<int, std::int64_t>{*count, wait->count()};
}

// --signal=[R:|B:]SIG[@SECONDS], or none: the warning before the time limit,
// as the JobSpec's warn_* fields.
struct Warning {
  int signal = 0;  // -1: none
  int seconds = 0;
  bool batch_only = false;
};

absl::StatusOr<Warning> ParseWarning(std::string_view text) {
  if (EqualsIgnoreCase(text, "none")) return Warning{-1, 0, false};
  Warning warning;
  warning.seconds = static_cast<int>(kDefaultWarningLead.count());
  std::string_view rest = text;
  if (const std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string_view target = rest.substr(0, colon);
    if (EqualsIgnoreCase(target, "B")) {
      warning.batch_only = true;
    } else if (!EqualsIgnoreCase(target, "R")) {
      return Invalid(fmt::format(
          "--signal: \"{}:\" is not a target; write B: (only the batch script, rank 0) or R: "
          "(every rank, the default) before the signal, such as B:USR1@90",
          target));
    }
    rest.remove_prefix(colon + 1);
  }
  const std::size_t at = rest.find('@');
  const std::string_view name = rest.substr(0, at);
  const std::optional<int> signal = SignalNumber(name);
  if (!signal) {
    return Invalid(fmt::format(
        "--signal: \"{}\" is not a signal; write USR1, SIGUSR1 or 10, optionally B: before and "
        "@SECONDS after (or none for no warning)",
        name));
  }
  warning.signal = *signal;
  if (at != std::string_view::npos) {
    const std::optional<int> seconds = ParseCount(rest.substr(at + 1));
    if (!seconds || *seconds < 1 || *seconds > kMaxWarningLead.count()) {
      return Invalid(fmt::format(
          "--signal: \"@{}\" is not a warning time; write @SECONDS from 1 to {}, the seconds "
          "before the time limit (such as USR1@90)",
          rest.substr(at + 1), kMaxWarningLead.count()));
    }
    warning.seconds = *seconds;
  }
  return warning;
}

absl::StatusOr<std::vector<std::string>> ParseConstraint(const std::string& text) {
  std::vector<std::string> features;
  for (const std::string_view feature : Split(text, ",&")) {
    if (!IsFeatureName(feature)) {
      return Invalid(fmt::format(
          "-C/--constraint \"{}\": write feature names joined by , or & (every node must have "
          "all of them); |, [ ], * and counts are not supported",
          text));
    }
    features.emplace_back(feature);
  }
  return features;
}

// Checks each option's value on its own, so that a directive's mistake is
// reported with its line; BuildJobSpec checks how they combine.
// --hint as the --cpu-bind it stands for (Slurm's are mutually exclusive):
// nomultithread and compute_bound, whole cores; multithread, threads.
absl::StatusOr<std::string> CpuBindOf(const JobOptions& o) {
  if (!o.hint) return o.cpu_bind.value_or("");
  if (o.cpu_bind) {
    return Invalid("--hint and --cpu-bind both say how ranks are bound; give one of them");
  }
  if (*o.hint == "nomultithread" || *o.hint == "compute_bound") return std::string("cores");
  if (*o.hint == "multithread") return std::string("threads");
  if (*o.hint == "memory_bound") {
    return Invalid(
        "--hint=memory_bound spreads ranks over sockets, and Cohort keeps each next to its GPU; "
        "use --cpu-bind=numa for the whole NUMA node of its GPU");
  }
  return Invalid(fmt::format(
      "--hint={:?} is not nomultithread, multithread, compute_bound or memory_bound", *o.hint));
}

absl::Status CheckValues(const JobOptions& o) {
  if (o.nodes && *o.nodes < 1) {
    return Invalid(fmt::format("-N/--nodes is {}; ask for at least 1 node", *o.nodes));
  }
  if (o.ntasks && *o.ntasks < 1) {
    return Invalid(fmt::format("-n/--ntasks is {}; ask for at least 1 rank", *o.ntasks));
  }
  if (o.tasks_per_node && *o.tasks_per_node < 1) {
    return Invalid(fmt::format("--ntasks-per-node is {}; ask for at least 1 rank per node",
                               *o.tasks_per_node));
  }
  if (o.cpus_per_task && *o.cpus_per_task < 1) {
    return Invalid(
        fmt::format("-c/--cpus-per-task is {}; ask for at least 1 CPU per rank", *o.cpus_per_task));
  }
  if (o.gpus_per_node && *o.gpus_per_node < 0) {
    return Invalid(fmt::format("--gpus-per-node is {}; ask for 0 or more GPUs", *o.gpus_per_node));
  }
  if (absl::Status valid = CheckResourceValues(o); !valid.ok()) return valid;
  for (const auto& [text, option] :
       {std::pair{&o.begin, "--begin"}, std::pair{&o.deadline, "--deadline"}}) {
    if (!*text) continue;
    if (absl::StatusOr<std::int64_t> at = ParseFutureTime(**text, option, NowMs()); !at.ok()) {
      return at.status();
    }
  }
  if (o.wrap && o.wrap->empty()) {
    return Invalid("--wrap is empty; give the command the job runs, such as --wrap=\"hostname\"");
  }
  if (o.time) {
    if (absl::StatusOr<std::int64_t> limit = TimeLimitSeconds(*o.time); !limit.ok()) {
      return Invalid(fmt::format("-t/--time: {}", limit.status()));
    }
  }
  if (o.switches) {
    if (auto parsed = ParseSwitches(*o.switches); !parsed.ok()) return parsed.status();
  }
  if (o.segment && *o.segment < 1) {
    return Invalid(fmt::format(
        "--segment={}: give the nodes per segment, at least 1 (such as --segment=18 for one "
        "NVL72 rack per piece)",
        *o.segment));
  }
  if (o.max_restarts &&
      (*o.max_restarts < 0 || *o.max_restarts > config::ClusterConfig::kMaxRestarts)) {
    return Invalid(
        fmt::format("--max-restarts={}: give how often a node failure may requeue the "
                    "job, 0-{}",
                    *o.max_restarts, config::ClusterConfig::kMaxRestarts));
  }
  if (o.spares && (*o.spares < 0 || *o.spares > kMaxJobNodes)) {
    return Invalid(fmt::format(
        "--spares={}: give how many spare nodes to hold, 0 up to the job's node count", *o.spares));
  }
  if (o.restart_policy && !ParseRestartPolicy(*o.restart_policy)) {
    return Invalid(
        fmt::format("--restart-policy={}: give job (start the batch script or the "
                    "command again) or step (end only the steps on the lost node)",
                    *o.restart_policy));
  }
  if (o.spread_segments && !o.segment) {
    return Invalid("--spread-segments needs --segment=S: the size of the pieces to spread");
  }
  if (o.constraint) {
    if (auto features = ParseConstraint(*o.constraint); !features.ok()) return features.status();
  }
  if (o.signal) {
    if (absl::StatusOr<Warning> warning = ParseWarning(*o.signal); !warning.ok()) {
      return warning.status();
    }
  }
  for (const auto& [list, option] :
       {std::pair{&o.nodelist, "-w/--nodelist"}, std::pair{&o.exclude, "-x/--exclude"}}) {
    if (!*list) continue;
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(**list);
    if (!names.ok()) return Invalid(fmt::format("{}: {}", option, names.status()));
  }
  if (o.export_env) {
    if (absl::StatusOr<ExportSpec> spec = ParseExport(*o.export_env); !spec.ok()) {
      return spec.status();
    }
  }
  absl::StatusOr<std::string> cpu_bind = CpuBindOf(o);
  if (!cpu_bind.ok()) return cpu_bind.status();
  if (absl::Status s =
          binding::ParseBindingOptions(o.gpu_bind.value_or(""), *cpu_bind, o.mem_bind.value_or(""))
              .status();
      !s.ok()) {
    return s;
  }
  if (o.open_mode && *o.open_mode != "append" && *o.open_mode != "truncate") {
    return Invalid(fmt::format(
        "--open-mode \"{}\": write append (add to the output files) or truncate (empty them "
        "first, the default)",
        *o.open_mode));
  }
  if (o.chdir && o.chdir->empty()) {
    return Invalid("-D/--chdir is empty; name the ranks' working directory");
  }
  if (o.job_name && o.job_name->empty()) {
    return Invalid("-J/--job-name is empty; name the job, or leave -J out");
  }
  // The controller reads --array and --dependency (and knows the QOS names);
  // here only what is plainly missing is refused.
  if (o.qos && o.qos->empty()) {
    return Invalid(
        "-q/--qos is empty; name a QOS (see cohort.conf's QOSName= lines), or leave "
        "--qos out for the cluster's DefaultQOS");
  }
  if (o.array && o.array->empty()) {
    return Invalid("-a/--array is empty; give the task ids, such as 0-99, 1,5,9-15:2 or 0-99%8");
  }
  if (o.dependency && o.dependency->empty()) {
    return Invalid(
        "-d/--dependency is empty; write TYPE:JOB[:JOB...], such as afterok:12, or "
        "leave it out");
  }
  if (o.kill_on_invalid_dep && !EqualsIgnoreCase(*o.kill_on_invalid_dep, "yes") &&
      !EqualsIgnoreCase(*o.kill_on_invalid_dep, "no")) {
    return Invalid(fmt::format(
        "--kill-on-invalid-dep \"{}\": write yes (cancel the job when its dependency can never "
        "be satisfied) or no (leave it pending, the default)",
        *o.kill_on_invalid_dep));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CurrentDirectory() {
  std::error_code error;
  std::filesystem::path cwd = std::filesystem::current_path(error);
  if (error) {
    return Invalid(fmt::format(
        "cannot tell the current directory: {}; cd to one that exists, or pass -D FOLDER",
        error.message()));
  }
  return cwd.string();
}

std::string OrDefault(const std::string& value, std::string_view fallback) {
  return value.empty() ? std::string(fallback) : value;
}

// Parses each directive's words as the command line's options, into
// `options`' unset fields; an option Cohort refuses names its line.
absl::Status ReadDirectiveOptions(const std::vector<directives::Directive>& lines,
                                  const std::string& path, JobOptions& options);

std::string FormatSeconds(std::int64_t s) {
  return s >= kUnlimited.count() ? "UNLIMITED" : FormatSlurmTime(std::chrono::seconds(s));
}

}  // namespace

void FillUnset(JobOptions& into, const JobOptions& from) {
  auto fill = [](auto& a, const auto& b) {
    if (!a) a = b;
  };
  fill(into.nodes, from.nodes);
  fill(into.nodes_max, from.nodes_max);
  fill(into.ntasks, from.ntasks);
  fill(into.tasks_per_node, from.tasks_per_node);
  fill(into.cpus_per_task, from.cpus_per_task);
  fill(into.gpus_per_node, from.gpus_per_node);
  fill(into.gres, from.gres);
  fill(into.gpus, from.gpus);
  fill(into.gpus_per_task, from.gpus_per_task);
  fill(into.cpus_per_gpu, from.cpus_per_gpu);
  fill(into.memory, from.memory);
  fill(into.mem_per_gpu, from.mem_per_gpu);
  fill(into.mem_per_cpu, from.mem_per_cpu);
  fill(into.time, from.time);
  fill(into.partition, from.partition);
  fill(into.account, from.account);
  fill(into.job_name, from.job_name);
  fill(into.output, from.output);
  fill(into.error, from.error);
  fill(into.chdir, from.chdir);
  fill(into.open_mode, from.open_mode);
  fill(into.switches, from.switches);
  fill(into.segment, from.segment);
  into.spread_segments = into.spread_segments || from.spread_segments;
  fill(into.export_env, from.export_env);
  fill(into.constraint, from.constraint);
  fill(into.nodelist, from.nodelist);
  fill(into.exclude, from.exclude);
  fill(into.requeue, from.requeue);
  fill(into.max_restarts, from.max_restarts);
  fill(into.spares, from.spares);
  fill(into.restart_policy, from.restart_policy);
  into.no_kill = into.no_kill || from.no_kill;
  into.overcommit = into.overcommit || from.overcommit;
  fill(into.signal, from.signal);
  fill(into.gpu_bind, from.gpu_bind);
  fill(into.cpu_bind, from.cpu_bind);
  fill(into.hint, from.hint);
  fill(into.mem_bind, from.mem_bind);
  fill(into.qos, from.qos);
  fill(into.reservation, from.reservation);
  fill(into.array, from.array);
  fill(into.dependency, from.dependency);
  fill(into.kill_on_invalid_dep, from.kill_on_invalid_dep);
  into.hold = into.hold || from.hold;
  into.exclusive = into.exclusive || from.exclusive;
  into.exclusive_topo = into.exclusive_topo || from.exclusive_topo;
  into.test_only = into.test_only || from.test_only;
  into.parsable = into.parsable || from.parsable;
  fill(into.begin, from.begin);
  fill(into.deadline, from.deadline);
  fill(into.comment, from.comment);
  fill(into.wckey, from.wckey);
  fill(into.mail_type, from.mail_type);
  fill(into.mail_user, from.mail_user);
  fill(into.wrap, from.wrap);
  into.wait = into.wait || from.wait;
  ContainerOptions& c = into.container;
  const ContainerOptions& f = from.container;
  for (auto [to, value] : {std::pair{&c.image, &f.image}, std::pair{&c.mounts, &f.mounts},
                           std::pair{&c.workdir, &f.workdir}, std::pair{&c.name, &f.name},
                           std::pair{&c.save, &f.save}, std::pair{&c.env, &f.env}}) {
    fill(*to, *value);
  }
  for (auto [to, value] :
       {std::pair{&c.mount_home, &f.mount_home}, std::pair{&c.remap_root, &f.remap_root},
        std::pair{&c.writable, &f.writable}, std::pair{&c.entrypoint, &f.entrypoint}}) {
    fill(*to, *value);
  }
}

namespace {

// Slurm's input variables (sbatch(1), salloc(1) "INPUT ENVIRONMENT
// VARIABLES") for the options Cohort has, after the command's prefix. A
// flag's variable sets it whatever its value.
struct InputVariable {
  std::string_view suffix;
  std::string_view option;
  bool flag = false;
};
constexpr InputVariable kInputVariables[] = {
    {"ACCOUNT", "--account"},
    {"ARRAY_INX", "--array"},
    {"CONSTRAINT", "--constraint"},
    {"CPU_BIND", "--cpu-bind"},
    {"ERROR", "--error"},
    {"EXPORT", "--export"},
    {"GPU_BIND", "--gpu-bind"},
    {"GPUS", "--gpus"},
    {"GPUS_PER_NODE", "--gpus-per-node"},
    {"GPUS_PER_TASK", "--gpus-per-task"},
    {"GRES", "--gres"},
    {"HINT", "--hint"},
    {"JOB_NAME", "--job-name"},
    {"MEM_BIND", "--mem-bind"},
    {"MEM_PER_CPU", "--mem-per-cpu"},
    {"MEM_PER_GPU", "--mem-per-gpu"},
    {"MEM_PER_NODE", "--mem"},
    {"NO_KILL", "--no-kill", true},
    {"NO_REQUEUE", "--no-requeue", true},
    {"OPEN_MODE", "--open-mode"},
    {"OVERCOMMIT", "--overcommit", true},
    {"OUTPUT", "--output"},
    {"PARTITION", "--partition"},
    {"QOS", "--qos"},
    {"REQ_SWITCH", "--switches"},
    {"REQUEUE", "--requeue", true},
    {"RESERVATION", "--reservation"},
    {"SIGNAL", "--signal"},
    {"TIMELIMIT", "--time"},
    {"WCKEY", "--wckey"},
};

}  // namespace

absl::Status ApplyInputVariables(std::string_view prefix, JobOptions& options,
                                 const char* const* environment) {
  if (environment == nullptr) environment = environ;
  JobOptions from_environment;
  for (const char* const* entry = environment; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos || !text.starts_with(prefix)) continue;
    const std::string_view suffix = text.substr(prefix.size(), equals - prefix.size());
    const std::string_view value = text.substr(equals + 1);
    const auto known = std::find_if(std::begin(kInputVariables), std::end(kInputVariables),
                                    [&](const InputVariable& v) { return v.suffix == suffix; });
    if (known == std::end(kInputVariables)) continue;  // another tool's, or not Cohort's
    // One parser per variable, so that an error names it.
    const std::string name(text.substr(0, equals));
    const std::vector<std::string> words{known->flag ? std::string(known->option)
                                                     : fmt::format("{}={}", known->option, value)};
    JobOptions one;
    CLI::App parser;
    parser.set_help_flag();
    const std::vector<UnsupportedOption> unsupported = AddJobOptions(parser, one, words);
    try {
      parser.parse(std::vector<std::string>(words.rbegin(), words.rend()));
    } catch (const CLI::ParseError& e) {
      return Invalid(fmt::format("{}={:?}: {}", name, value, e.what()));
    }
    absl::Status valid = CheckValues(one);
    if (valid.ok()) valid = CheckNotImplemented(unsupported);
    if (!valid.ok()) return Invalid(fmt::format("{}={:?}: {}", name, value, valid.message()));
    FillUnset(one, from_environment);
    from_environment = std::move(one);
  }
  FillUnset(options, from_environment);
  return absl::OkStatus();
}

absl::Status ApplyDirectives(std::string_view script, const std::string& path,
                             JobOptions& options) {
  const directives::DirectiveResult parsed = directives::ParseDirectives(script, path);
  // Warnings are printed in the order of the script's lines, before any error.
  std::vector<std::pair<int, std::string>> warnings;
  const auto print_warnings = [&warnings] {
    std::stable_sort(warnings.begin(), warnings.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [line, text] : warnings) std::cerr << "cohort: warning: " << text << '\n';
  };
  std::string first_error;
  for (const Diagnostic& d : parsed.diagnostics.All()) {
    std::string text = fmt::format("{}:{}: {}{}{}", d.where.file, d.where.line, d.message,
                                   d.hint.empty() ? "" : "; ", d.hint);
    if (d.severity == Severity::kWarning) {
      warnings.emplace_back(d.where.line, std::move(text));
    } else if (first_error.empty()) {
      first_error = std::move(text);
    }
  }
  if (!first_error.empty()) {
    print_warnings();
    return Invalid(first_error);
  }
  absl::Status status = ReadDirectiveOptions(parsed.directives, path, options);
  print_warnings();
  return status;
}

namespace {

absl::Status ReadDirectiveOptions(const std::vector<directives::Directive>& lines,
                                  const std::string& path, JobOptions& options) {
  JobOptions from_script;
  for (const directives::Prefix prefix :
       {directives::Prefix::kSbatch, directives::Prefix::kCohort}) {
    for (const directives::Directive& d : lines) {
      if (d.prefix != prefix) continue;
      // One parser per line, so that errors and warnings name their line.
      JobOptions line;
      CLI::App line_parser;
      line_parser.set_help_flag();
      const std::vector<UnsupportedOption> unsupported = AddJobOptions(line_parser, line, d.args);
      std::vector<std::string> words(d.args.rbegin(), d.args.rend());  // CLI11 reads from the back
      const std::string where = fmt::format("{}:{}", path, d.line);
      try {
        line_parser.parse(words);
      } catch (const CLI::ExtrasError&) {
        std::vector<std::string> known;
        for (const CLI::Option* option : line_parser.get_options()) {
          if (!option->get_group().empty()) {
            for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
          }
        }
        std::vector<std::string_view> known_views(known.begin(), known.end());
        std::string unknown;
        for (const std::string& arg : line_parser.remaining()) {
          if (arg.starts_with("-")) {
            unknown = arg.substr(0, arg.find('='));
            break;
          }
        }
        if (unknown.empty()) {
          return Invalid(fmt::format(
              "{}: {} takes only options; \"{}\" is not one (arguments of the script go after its "
              "name on the command line)",
              where, directives::PrefixText(d.prefix), line_parser.remaining().front()));
        }
        const std::string nearest = NearestWord(unknown, known_views);
        return Invalid(fmt::format("{}: {} {}: unknown option; {}", where,
                                   directives::PrefixText(d.prefix), unknown,
                                   nearest.empty() ? "see cohort submit --help for the options"
                                                   : fmt::format("did you mean {}?", nearest)));
      } catch (const CLI::ParseError& e) {
        return Invalid(fmt::format("{}: {} {}: {}", where, directives::PrefixText(d.prefix),
                                   fmt::join(d.args, " "), e.what()));
      }
      if (absl::Status valid = CheckValues(line); !valid.ok()) {
        return Invalid(fmt::format("{}: {} {}: {}", where, directives::PrefixText(d.prefix),
                                   fmt::join(d.args, " "), valid.message()));
      }
      if (absl::Status refused = CheckNotImplemented(unsupported); !refused.ok()) {
        return Invalid(
            fmt::format("{}: {} {}", where, directives::PrefixText(d.prefix), refused.message()));
      }
      // A later line wins over an earlier one.
      FillUnset(line, from_script);
      from_script = std::move(line);
    }
  }
  FillUnset(options, from_script);
  return absl::OkStatus();
}

}  // namespace

namespace {

// pyxis's PYXIS_CONTAINER_* variable for an option not given, as it reads
// them: a boolean is 1, true, yes or y, or 0, false, no or n.
std::optional<std::string> FromEnvironment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<std::optional<bool>> BoolFromEnvironment(const char* name) {
  const std::optional<std::string> value = FromEnvironment(name);
  if (!value) return std::nullopt;
  std::string lower = *value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "y") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "n") return false;
  return Invalid(fmt::format("{}={:?} is no boolean; set it to 1 or 0", name, *value));
}

}  // namespace

absl::StatusOr<v1::ContainerSpec> BuildContainerSpec(const ContainerOptions& given) {
  ContainerOptions o = given;
  for (auto [field, variable] :
       {std::pair{&o.image, "PYXIS_CONTAINER_IMAGE"},
        std::pair{&o.mounts, "PYXIS_CONTAINER_MOUNTS"},
        std::pair{&o.workdir, "PYXIS_CONTAINER_WORKDIR"},
        std::pair{&o.name, "PYXIS_CONTAINER_NAME"}, std::pair{&o.save, "PYXIS_CONTAINER_SAVE"},
        std::pair{&o.env, "PYXIS_CONTAINER_ENV"}}) {
    if (!*field) *field = FromEnvironment(variable);
  }
  for (auto [field, variable] : {std::pair{&o.mount_home, "PYXIS_CONTAINER_MOUNT_HOME"},
                                 std::pair{&o.remap_root, "PYXIS_CONTAINER_REMAP_ROOT"},
                                 std::pair{&o.writable, "PYXIS_CONTAINER_WRITABLE"},
                                 std::pair{&o.entrypoint, "PYXIS_CONTAINER_ENTRYPOINT"}}) {
    if (*field) continue;
    absl::StatusOr<std::optional<bool>> value = BoolFromEnvironment(variable);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  if (!o.writable) {
    absl::StatusOr<std::optional<bool>> readonly = BoolFromEnvironment("PYXIS_CONTAINER_READONLY");
    if (!readonly.ok()) return readonly.status();
    if (*readonly) o.writable = !**readonly;
  }
  v1::ContainerSpec spec;
  if (o.image) {
    absl::StatusOr<container::ImageSource> image = container::ParseImageReference(*o.image);
    if (!image.ok()) return image.status();
    spec.set_image(*o.image);
  }
  if (o.mounts) {
    absl::StatusOr<std::vector<container::Mount>> mounts = container::ParseMounts(*o.mounts);
    if (!mounts.ok()) return mounts.status();
    spec.set_mounts(*o.mounts);
  }
  if (o.workdir) {
    if (absl::Status workdir = container::CheckWorkdir(*o.workdir); !workdir.ok()) return workdir;
    spec.set_workdir(*o.workdir);
  }
  if (o.name) {
    absl::StatusOr<container::ContainerName> name = container::ParseContainerName(*o.name);
    if (!name.ok()) return name.status();
    spec.set_name(*o.name);
  }
  if (o.env) {
    absl::StatusOr<std::vector<std::string>> env = container::ParseEnvNames(*o.env);
    if (!env.ok()) return env.status();
    spec.set_env(*o.env);
  }
  if (o.save) {
    if (absl::Status save = container::CheckSavePath(*o.save); !save.ok()) return save;
    spec.set_save(*o.save);
  }
  if (o.mount_home) spec.set_mount_home(*o.mount_home);
  if (o.remap_root) spec.set_remap_root(*o.remap_root);
  if (o.writable) spec.set_writable(*o.writable);
  if (o.entrypoint) spec.set_entrypoint(*o.entrypoint);
  return spec;
}

absl::StatusOr<v1::JobSpec> BuildJobSpec(const JobOptions& o, const std::string& default_name) {
  if (absl::Status valid = CheckValues(o); !valid.ok()) return valid;
  absl::StatusOr<NodeShape> shape = ResolveShape(o);
  if (!shape.ok()) return shape.status();
  if (o.nodes_max && *o.nodes_max > shape->nodes) {
    std::cerr << fmt::format(
        "cohort: note: -N {}-{}: the job gets {} node{}, the minimum, as soon as they are free; "
        "it is not grown toward {}\n",
        shape->nodes, *o.nodes_max, shape->nodes, shape->nodes == 1 ? "" : "s", *o.nodes_max);
  }
  v1::JobSpec spec;
  spec.set_nodes(shape->nodes);
  spec.set_tasks_per_node(shape->tasks_per_node);
  spec.set_cpus_per_task(shape->cpus_per_task);
  spec.set_gpus_per_node(shape->gpus_per_node);
  spec.set_memory_mb(shape->memory_mb);
  spec.set_gpu_type(shape->gpu_type);
  const std::int64_t now = NowMs();
  if (o.begin) spec.set_begin_time_s(*ParseFutureTime(*o.begin, "--begin", now) / 1000);
  if (o.deadline) spec.set_deadline_s(*ParseFutureTime(*o.deadline, "--deadline", now) / 1000);
  spec.set_comment(o.comment.value_or(""));
  spec.set_wckey(o.wckey.value_or(""));
  spec.set_mail_type(o.mail_type.value_or(""));
  spec.set_mail_user(o.mail_user.value_or(""));
  if (o.mail_type || o.mail_user) {
    std::cerr << "cohort: note: --mail-type and --mail-user are stored and shown; Cohort sends no "
                 "mail (follow the job with cohort queue, or sbatch -W)\n";
  }
  // CheckValues has vetted every value parsed below.
  if (o.time) spec.set_time_limit_s(*TimeLimitSeconds(*o.time));
  if (o.switches) {
    const std::pair<int, std::int64_t> switches = *ParseSwitches(*o.switches);
    spec.set_switches(switches.first);
    spec.set_switches_wait_s(switches.second);
  }
  if (o.segment) spec.set_segment(*o.segment);
  spec.set_spread_segments(o.spread_segments);
  if (o.constraint) {
    const std::vector<std::string> features = *ParseConstraint(*o.constraint);
    for (const std::string& feature : features) spec.add_features(feature);
  }
  if (o.signal) {
    // Not given: 0/0, the controller's default (USR1@90).
    const Warning warning = *ParseWarning(*o.signal);
    spec.set_warn_signal(warning.signal);
    spec.set_warn_seconds(warning.seconds);
    spec.set_warn_batch_only(warning.batch_only);
  }
  absl::StatusOr<v1::ContainerSpec> container = BuildContainerSpec(o.container);
  if (!container.ok()) return container.status();
  if (container->ByteSizeLong() > 0) *spec.mutable_container() = *std::move(container);
  spec.set_gpu_bind(o.gpu_bind.value_or(""));
  spec.set_cpu_bind(*CpuBindOf(o));
  spec.set_mem_bind(o.mem_bind.value_or(""));
  spec.set_nodelist(o.nodelist.value_or(""));
  spec.set_exclude(o.exclude.value_or(""));
  for (v1::EnvVar& var : BuildEnvironment(*ParseExport(o.export_env.value_or("ALL")))) {
    // This command's own limits below stand, whatever the environment said.
    if (var.name().starts_with(launch::kRlimitPrefix)) continue;
    *spec.add_env() = std::move(var);
  }
  // The submitter's soft limits (ulimit), as sbatch and srun pass them
  // (--propagate chooses which).
  for (const launch::ResourceLimit& limit : launch::kResourceLimits) {
    if (!launch::Propagates(o.propagate, limit.name)) continue;
    rlimit current{};
    if (::getrlimit(limit.resource, &current) != 0) continue;
    v1::EnvVar& var = *spec.add_env();
    var.set_name(fmt::format("{}{}", launch::kRlimitPrefix, limit.name));
    var.set_value(std::to_string(current.rlim_cur));
  }

  absl::StatusOr<std::string> cwd = CurrentDirectory();
  if (!cwd.ok()) return cwd.status();
  spec.set_submit_dir(*cwd);
  // The ranks run with the submitter's umask, as sbatch's do (SLURM_UMASK);
  // reading it means setting it, so it is set back at once.
  const mode_t umask = ::umask(0);
  ::umask(umask);
  spec.set_umask(umask & 0777);
  spec.set_work_dir(o.chdir ? (std::filesystem::path(*cwd) / *o.chdir).lexically_normal().string()
                            : *cwd);
  spec.set_name(o.job_name.value_or(default_name));
  spec.set_partition(o.partition.value_or(""));
  spec.set_account(o.account.value_or(""));
  spec.set_output(o.output.value_or(""));
  spec.set_error(o.error.value_or(""));
  spec.set_open_mode(o.open_mode.value_or("truncate"));
  spec.set_exclusive(o.exclusive);
  spec.set_exclusive_topo(o.exclusive_topo);
  spec.set_requeue(o.requeue.value_or(o.max_restarts.value_or(0) > 0));
  if (o.max_restarts) spec.set_max_restarts(*o.max_restarts);
  spec.set_no_kill(o.no_kill);
  spec.set_overcommit(o.overcommit);
  if (o.spares) spec.set_spares(*o.spares);
  if (o.restart_policy) spec.set_restart_policy(*o.restart_policy);
  spec.set_qos(o.qos.value_or(""));
  spec.set_reservation(o.reservation.value_or(""));
  spec.set_array(o.array.value_or(""));
  spec.set_dependency(o.dependency.value_or(""));
  spec.set_kill_on_invalid_dep(o.kill_on_invalid_dep &&
                               EqualsIgnoreCase(*o.kill_on_invalid_dep, "yes"));
  spec.set_hold(o.hold);
  // The controller names the owner from the caller's uid (user_name).
  return spec;
}

void PrintJobSpec(const v1::JobSpec& spec, std::ostream& out) {
  auto line = [&out](std::string_view key, const std::string& value) {
    out << fmt::format("{:<16}{}\n", key, value);
  };
  std::vector<std::string> argv;
  for (const std::string& word : spec.argv()) argv.push_back(ShellQuote(word));
  std::vector<std::string> env;
  for (const v1::EnvVar& var : spec.env()) env.push_back(var.name());
  line("name", spec.name());
  if (!spec.user_name().empty()) line("user_name", spec.user_name());
  line("partition", OrDefault(spec.partition(), "(the default partition)"));
  line("account", OrDefault(spec.account(), "(your user name)"));
  line("qos", OrDefault(spec.qos(), "(the cluster's DefaultQOS)"));
  line("nodes", std::to_string(spec.nodes()));
  line("tasks_per_node", std::to_string(spec.tasks_per_node()));
  line("cpus_per_task", std::to_string(spec.cpus_per_task()));
  line("gpus_per_node", std::to_string(spec.gpus_per_node()));
  line("memory_mb", spec.memory_mb() == 0 ? "(none asked)" : std::to_string(spec.memory_mb()));
  line("time_limit",
       spec.time_limit_s() == 0 ? "(the partition's)" : FormatSeconds(spec.time_limit_s()));
  line("argv", fmt::format("{}", fmt::join(argv, " ")));
  line("script", spec.script().empty()
                     ? "(none)"
                     : fmt::format("{} bytes, run as {}", spec.script().size(),
                                   spec.argv().empty() ? "" : ShellQuote(spec.argv(0))));
  line("work_dir", spec.work_dir());
  line("output", OrDefault(spec.output(), "(cohort-%j.out in work_dir)"));
  line("error", OrDefault(spec.error(), "(with the output)"));
  line("open_mode", OrDefault(spec.open_mode(), "truncate"));
  line("exclusive", spec.exclusive_topo() ? "topo (whole blocks)"
                    : spec.exclusive()    ? "yes"
                                          : "no");
  line("switches", spec.switches() == 0 ? "(no bound)"
                   : spec.switches_wait_s() == 0
                       ? std::to_string(spec.switches())
                       : fmt::format("{}, waiting up to {}", spec.switches(),
                                     FormatSeconds(spec.switches_wait_s())));
  line("segment", spec.segment() == 0
                      ? std::string("(none)")
                      : fmt::format("{} nodes{}", spec.segment(),
                                    spec.spread_segments() ? ", each in a block of its own" : ""));
  line("requeue",
       !spec.requeue() ? std::string("no")
       : spec.has_max_restarts()
           ? fmt::format("yes, at most {} times after node failures", spec.max_restarts())
           : std::string("yes"));
  if (spec.no_kill()) line("no-kill", "yes: a lost node is dropped, the job goes on");
  if (spec.overcommit()) line("overcommit", "yes: a node's tasks share cpus-per-task CPUs");
  if (spec.spares() > 0) {
    line("spares", fmt::format("{} node{} held inside the gang's leaf or block; restart policy {}",
                               spec.spares(), spec.spares() == 1 ? "" : "s",
                               spec.restart_policy().empty() ? "job" : spec.restart_policy()));
  }
  line("array", OrDefault(spec.array(), "(none)"));
  line("dependency", spec.dependency().empty() ? std::string("(none)")
                     : spec.kill_on_invalid_dep()
                         ? spec.dependency() + ", cancelled if it can never be satisfied"
                         : spec.dependency());
  line("hold", spec.hold() ? "yes" : "no");
  line("signal", FormatWarning(spec));
  line("features",
       spec.features().empty() ? "(none)" : fmt::format("{}", fmt::join(spec.features(), ",")));
  line("nodelist", OrDefault(spec.nodelist(), "(none)"));
  line("exclude", OrDefault(spec.exclude(), "(none)"));
  line("env", fmt::format("{} variable{}{}{}", env.size(), env.size() == 1 ? "" : "s",
                          env.empty() ? "" : ": ", fmt::join(env, " ")));
  line("submit_dir", spec.submit_dir());
}

void PrintTestOnlyAnswer(const v1::SubmitJobResponse& response, std::ostream& out) {
  if (!response.would_run_on().empty()) {
    out << fmt::format("{:<16}{}\n", "would_run_on", response.would_run_on());
    return;
  }
  out << fmt::format("{:<16}{}\n", "would_run_on", "(nowhere now)");
  out << fmt::format("{:<16}{}\n", "reason", response.reason());
}

absl::StatusOr<Command> SplitCommand(const std::vector<std::string>& remaining,
                                     std::string_view verb) {
  Command command;
  if (remaining.empty()) return command;
  if (remaining.front() == "--") {
    command.after_dashes = true;
    command.words.assign(remaining.begin() + 1, remaining.end());
    return command;
  }
  // CLI11 leaves an unknown option before the first positional here too.
  if (remaining.front().size() > 1 && remaining.front().starts_with("-")) {
    return Invalid(fmt::format("{}: unknown option {}; see cohort {} --help for the options", verb,
                               remaining.front().substr(0, remaining.front().find('=')), verb));
  }
  command.words = remaining;
  return command;
}

void TakeCommandVerbatim(CLI::App& command, std::string usage, std::string description) {
  // A positional that accepts no word: CLI11 then leaves the first positional
  // and everything after it to remaining(), and still honours `--`. It only
  // documents the usage in --help.
  command.prefix_command();
  command.validate_positionals();
  command.add_option(std::move(usage), CLI::callback_t(), std::move(description), false)
      ->expected(-1)
      ->type_name("")
      ->check(CLI::Validator([](std::string&) { return std::string("taken verbatim"); }, "", ""));
}

std::string ShellQuote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(word);
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace cohort::cli
