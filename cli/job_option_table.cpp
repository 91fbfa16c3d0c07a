// SPDX-License-Identifier: Apache-2.0
#include "job_option_table.h"

#include <string_view>
#include <utility>

namespace cohort::cli {
namespace {

// sbatch's options that Cohort does not support yet. kValue ones take a
// value (`--mail-type END` or `--mail-type=END`); kFlag ones take none, or
// one only after `=` (`--nice`, `--nice=10`).
enum class Takes { kValue, kFlag };
struct Unsupported {
  const char* names;
  Takes takes;
};
constexpr Unsupported kUnsupported[] = {
    {"--mail-user", Takes::kValue},
    {"--mail-type", Takes::kValue},
    {"-G,--gpus", Takes::kValue},
    {"--gpus-per-task", Takes::kValue},
    {"--gpus-per-socket", Takes::kValue},
    {"--cpus-per-gpu", Takes::kValue},
    {"--mem-per-cpu", Takes::kValue},
    {"--mem-per-gpu", Takes::kValue},
    {"--begin", Takes::kValue},
    {"--deadline", Takes::kValue},
    {"--priority", Takes::kValue},
    {"--reservation", Takes::kValue},
    {"-L,--licenses", Takes::kValue},
    {"--comment", Takes::kValue},
    {"--wckey", Takes::kValue},
    {"-m,--distribution", Takes::kValue},
    {"--hint", Takes::kValue},
    {"--threads-per-core", Takes::kValue},
    {"--cores-per-socket", Takes::kValue},
    {"--sockets-per-node", Takes::kValue},
    {"--ntasks-per-socket", Takes::kValue},
    {"--ntasks-per-core", Takes::kValue},
    {"--ntasks-per-gpu", Takes::kValue},
    {"--gpu-freq", Takes::kValue},
    {"--cpu-freq", Takes::kValue},
    {"--tmp", Takes::kValue},
    {"-S,--core-spec", Takes::kValue},
    {"--thread-spec", Takes::kValue},
    {"--acctg-freq", Takes::kValue},
    {"--profile", Takes::kValue},
    {"-M,--clusters", Takes::kValue},
    {"--cluster-constraint", Takes::kValue},
    {"--container", Takes::kValue},
    {"--delay-boot", Takes::kValue},
    {"--extra", Takes::kValue},
    {"--mcs-label", Takes::kValue},
    {"--network", Takes::kValue},
    {"--power", Takes::kValue},
    {"--prefer", Takes::kValue},
    {"--wrap", Takes::kValue},
    {"--mincpus", Takes::kValue},
    {"-i,--input", Takes::kValue},
    {"--gres-flags", Takes::kValue},
    {"--time-min", Takes::kValue},
    {"--export-file", Takes::kValue},
    {"--segment", Takes::kValue},
    {"-B,--extra-node-info", Takes::kValue},
    {"-F,--nodefile", Takes::kValue},
    {"--uid", Takes::kValue},
    {"--gid", Takes::kValue},
    {"--bb", Takes::kValue},
    {"--bbf", Takes::kValue},
    {"--tres-per-task", Takes::kValue},
    {"--tres-bind", Takes::kValue},
    {"--nice", Takes::kFlag},
    {"-W,--wait", Takes::kFlag},
    {"-Q,--quiet", Takes::kFlag},
    {"-v,--verbose", Takes::kFlag},
    {"-k,--no-kill", Takes::kFlag},
    {"-O,--overcommit", Takes::kFlag},
    {"-s,--oversubscribe", Takes::kFlag},
    {"--contiguous", Takes::kFlag},
    {"--get-user-env", Takes::kFlag},
    {"--propagate", Takes::kFlag},
    {"-I,--immediate", Takes::kFlag},
    {"--reboot", Takes::kFlag},
    {"--spread-job", Takes::kFlag},
    {"--use-min-nodes", Takes::kFlag},
    {"--ignore-pbs", Takes::kFlag},
};

std::string LongName(std::string_view names) {
  const std::size_t at = names.find("--");
  return std::string(at == std::string_view::npos ? names : names.substr(at));
}

// Whether an unsupported option may be among `words`: a word that starts
// with `--` and whose name (up to any `=`) is one, or a word that starts
// with one `-` and holds one's letter anywhere (short flags bundle, and
// values follow them: `-Qv`, `-G2`). Words after `--` are a command's, but
// a script's arguments are not told apart: this may say yes for nothing,
// never no for one.
bool MayNameUnsupported(std::span<const std::string> words) {
  for (const std::string_view word : words) {
    if (word == "--") return false;
    if (word.size() < 2 || word.front() != '-') continue;
    const bool long_name = word.starts_with("--");
    const std::string_view given = long_name ? word.substr(0, word.find('=')) : word.substr(1);
    for (const Unsupported& u : kUnsupported) {
      for (std::string_view names = u.names; !names.empty();) {
        const std::size_t comma = names.find(',');
        const std::string_view name = names.substr(0, comma);
        names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
        const bool short_name = !name.starts_with("--");
        if (long_name ? name == given
                      : short_name && given.find(name[1]) != std::string_view::npos) {
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

std::vector<UnsupportedOption> AddJobOptions(CLI::App& command, JobOptions& o,
                                             std::span<const std::string> words) {
  const std::string group = "Job options (as sbatch's)";
  // As with sbatch, a later occurrence of an option wins over an earlier one.
  auto value = [&](std::string names, auto& field, std::string type, std::string help) {
    command.add_option(std::move(names), field, std::move(help))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->type_name(std::move(type))
        ->group(group);
  };
  auto flag = [&](std::string names, auto&& set, std::string help) {
    command.add_flag_callback(std::move(names), std::forward<decltype(set)>(set), std::move(help))
        ->group(group);
  };
  value("-N,--nodes", o.nodes, "N", "nodes of the job (default 1)");
  value("-n,--ntasks", o.ntasks, "N",
        "ranks in all, spread evenly: a multiple of the nodes (or give --ntasks-per-node)");
  value("--ntasks-per-node", o.tasks_per_node, "N", "ranks per node (default 1)");
  value("-c,--cpus-per-task", o.cpus_per_task, "N", "CPUs per rank (default 1)");
  value("--gpus-per-node", o.gpus_per_node, "N", "GPUs per node (default 0)");
  value("--gres", o.gres, "gpu:N", "the same as --gpus-per-node N");
  value("--mem", o.memory, "SIZE", "memory per node: MB, or a number with K, M, G or T (500G)");
  value("-t,--time", o.time, "TIME",
        "time limit: MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN, D-H:MIN:SEC or UNLIMITED (default: "
        "the partition's DefaultTime, else its MaxTime)");
  value("-p,--partition", o.partition, "NAME", "partition (default: the default partition)");
  value("-A,--account", o.account, "NAME", "account to charge (default: your user name)");
  value("-J,--job-name", o.job_name, "NAME",
        "name of the job (default: the script's or the command's file name)");
  value("-o,--output", o.output, "FILE",
        "file for the ranks' stdout, relative to the working directory; %j is the job id, %t the "
        "rank (default: cohort-%j.out)");
  value("-e,--error", o.error, "FILE", "file for the ranks' stderr, as -o (default: with stdout)");
  value("-D,--chdir", o.chdir, "DIR",
        "working directory of the ranks, created if missing (default: the current directory)");
  value("--open-mode", o.open_mode, "append|truncate",
        "open the -o and -e files for appending, or empty them first (default: truncate)");
  flag("--exclusive", [&o] { o.exclusive = true; }, "whole nodes only, shared with no other job");
  value("--switches", o.switches, "N[@TIME]",
        "at most N leaf switches; with @TIME, wait at most that long for them");
  flag("--requeue", [&o] { o.requeue = true; },
       "start the job again if a node fails or it is preempted");
  flag("--no-requeue", [&o] { o.requeue = false; }, "never start the job again (the default)");
  value("--export", o.export_env, "ALL|NONE|VARS",
        "environment of the ranks: ALL (the default: all of this one), NONE, or NAME[=VALUE],... "
        "(only those); ALL,NAME=VALUE adds to all");
  value("-C,--constraint", o.constraint, "FEATURES",
        "features every node must have, joined by , or &");
  value("-w,--nodelist", o.nodelist, "HOSTLIST",
        "nodes that must be in the job (a hostlist: gpu[001-004])");
  value("-x,--exclude", o.exclude, "HOSTLIST", "nodes that must not be (a hostlist)");
  value("--signal", o.signal, "[B:]SIG[@SECONDS]",
        "warn the ranks with SIG (a name such as USR1, or a number) SECONDS (default 90) before "
        "the time limit; B: only the batch script (rank 0); none: no warning (default: USR1@90)");
  value("--gpu-bind", o.gpu_bind, "closest|single:N|none",
        "GPUs each rank sees: its own (closest, the default), N ranks per GPU (single:N), or all "
        "of the job's GPUs on the node (none, for CUDA peer-to-peer between ranks)");
  value("--cpu-bind", o.cpu_bind, "cores|threads|numa|none",
        "CPUs each rank is bound to, next to its GPU: whole cores (the default), threads, its "
        "whole NUMA node, or none");
  value("--mem-bind", o.mem_bind, "local|none",
        "memory of each rank on its GPU's NUMA node (local, the default) or anywhere (none)");
  value("-q,--qos", o.qos, "NAME",
        "quality of service: its priority, limits and preemption rights (default: the cluster's "
        "DefaultQOS)");
  value("-a,--array", o.array, "IDS",
        "a job array, one job per task id: 0-999, 1,5,9-15:2 (a step), 0-99%8 (at most 8 "
        "running at once); ids are J_i");
  value("-d,--dependency", o.dependency, "LIST",
        "start only after other jobs: after:J, afterok:J, afternotok:J, afterany:J (J or J_i, "
        "several as afterok:J:K), singleton; joined by , (all) or ? (any)");
  value("--kill-on-invalid-dep", o.kill_on_invalid_dep, "yes|no",
        "cancel the job when its dependency can never be satisfied (default no: it stays pending "
        "with reason DependencyNeverSatisfied)");
  flag("-H,--hold", [&o] { o.hold = true; },
       "submit the job held: it is not started until cohort release");
  flag("--test-only", [&o] { o.test_only = true; },
       "check the job and say where it would run now; submit nothing");
  flag("--parsable", [&o] { o.parsable = true; }, "print only the job id");

  std::vector<UnsupportedOption> unsupported;
  if (!MayNameUnsupported(words)) return unsupported;
  for (const Unsupported& u : kUnsupported) {
    CLI::Option* option =
        u.takes == Takes::kValue ? command.add_option(u.names) : command.add_flag(u.names);
    option->group("");  // hidden from --help
    if (u.takes == Takes::kValue) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    unsupported.push_back({option, LongName(u.names)});
  }
  return unsupported;
}

std::vector<std::string> GivenUnsupported(const std::vector<UnsupportedOption>& unsupported) {
  std::vector<std::string> given;
  for (const UnsupportedOption& u : unsupported) {
    if (u.option->count() > 0) given.push_back(u.name);
  }
  return given;
}

}  // namespace cohort::cli
