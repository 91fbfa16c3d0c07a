// SPDX-License-Identifier: Apache-2.0
#include "spec/job_option_table.h"

#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "cohort/launch/resource_limits.h"
#include "spec/job_resources.h"

namespace cohort::cli {
namespace {

// sbatch's options that Cohort does not implement. kValue ones take a
// value (`--mail-type END` or `--mail-type=END`); kFlag ones take none, or
// one only after `=` (`--nice`, `--nice=10`). A kRefused option changes
// where, when or how a job runs, so it is refused with `text`, the closest
// supported alternative; a kHarmless one does not, and is accepted and
// dropped (`text` says why, as docs/slurm.md does).
constexpr SbatchOption kNotImplemented[] = {
    {"-Q,--quiet", Takes::kFlag, Handling::kHarmless, "the commands print little already"},
    {"-v,--verbose", Takes::kFlag, Handling::kHarmless,
     "the commands' messages are complete already"},
    {"--acctg-freq", Takes::kValue, Handling::kHarmless,
     "usage is measured when each rank ends (MaxRSS, TotalCPU)"},
    {"--profile", Takes::kValue, Handling::kHarmless,
     "no profile data is gathered; usage is measured when each rank ends"},
    {"--ignore-pbs", Takes::kFlag, Handling::kHarmless, "#PBS lines are never read"},
    {"--get-user-env", Takes::kFlag, Handling::kRefused,
     "the submitting shell's environment is exported (--export=ALL, the default)"},
    {"--gpus-per-socket", Takes::kValue, Handling::kRefused,
     "use --gpus-per-node; ranks are placed next to their GPUs"},
    {"--priority", Takes::kValue, Handling::kRefused, "use -q/--qos for a higher priority"},
    {"--nice", Takes::kFlag, Handling::kRefused, "use -q/--qos for a lower priority"},
    {"-L,--licenses", Takes::kValue, Handling::kRefused, "use a QOS with a job limit (-q)"},
    {"-m,--distribution", Takes::kValue, Handling::kRefused,
     "ranks are placed in blocks, each next to its GPU; use --ntasks-per-node"},
    {"--threads-per-core", Takes::kValue, Handling::kRefused, "use --cpu-bind=cores or threads"},
    {"--cores-per-socket", Takes::kValue, Handling::kRefused,
     "use -c/--cpus-per-task and -C/--constraint"},
    {"--sockets-per-node", Takes::kValue, Handling::kRefused,
     "use -c/--cpus-per-task and -C/--constraint"},
    {"--ntasks-per-socket", Takes::kValue, Handling::kRefused,
     "use --ntasks-per-node; ranks are placed next to their GPUs"},
    {"--ntasks-per-core", Takes::kValue, Handling::kRefused, "use --cpu-bind=cores or threads"},
    {"--ntasks-per-gpu", Takes::kValue, Handling::kRefused,
     "use --ntasks-per-node with --gpus-per-node, or --gpu-bind=single:N"},
    {"--gpu-freq", Takes::kValue, Handling::kRefused, "GPU clocks are the node's; leave it out"},
    {"--cpu-freq", Takes::kValue, Handling::kRefused, "CPU clocks are the node's; leave it out"},
    {"--tmp", Takes::kValue, Handling::kRefused,
     "use -C/--constraint with a feature of nodes with enough disk"},
    {"-S,--core-spec", Takes::kValue, Handling::kRefused,
     "cores for the system are set aside in the node's configuration"},
    {"--thread-spec", Takes::kValue, Handling::kRefused,
     "cores for the system are set aside in the node's configuration"},
    {"-M,--clusters", Takes::kValue, Handling::kRefused,
     "point --controller or COHORT_CONTROLLER at the other cluster"},
    {"--cluster-constraint", Takes::kValue, Handling::kRefused,
     "point --controller or COHORT_CONTROLLER at the other cluster"},
    {"--container", Takes::kValue, Handling::kRefused,
     "run the container's runtime in the script (apptainer exec, enroot start)"},
    {"--delay-boot", Takes::kValue, Handling::kRefused,
     "nodes are never rebooted for jobs; leave it out"},
    {"--extra", Takes::kValue, Handling::kRefused, "use -C/--constraint"},
    {"--mcs-label", Takes::kValue, Handling::kRefused, "use -A/--account"},
    {"--network", Takes::kValue, Handling::kRefused,
     "each rank gets the NICs next to its GPU (COHORT_NICS)"},
    {"--power", Takes::kValue, Handling::kRefused, "leave it out"},
    {"--prefer", Takes::kValue, Handling::kRefused,
     "use -C/--constraint (required, not preferred)"},
    {"--mincpus", Takes::kValue, Handling::kRefused,
     "use -c/--cpus-per-task with --ntasks-per-node"},
    {"-i,--input", Takes::kValue, Handling::kRefused, "read the file in the script (< FILE)"},
    {"--gres-flags", Takes::kValue, Handling::kRefused,
     "ranks are always placed next to their GPUs; leave it out"},
    {"--time-min", Takes::kValue, Handling::kRefused, "give -t/--time the shorter limit"},
    {"--export-file", Takes::kValue, Handling::kRefused, "use --export=ALL,NAME=VALUE,..."},
    {"-B,--extra-node-info", Takes::kValue, Handling::kRefused,
     "use -c/--cpus-per-task and -C/--constraint"},
    {"-F,--nodefile", Takes::kValue, Handling::kRefused, "use -w/--nodelist with a hostlist"},
    {"--uid", Takes::kValue, Handling::kRefused, "submit as that user"},
    {"--gid", Takes::kValue, Handling::kRefused, "submit as that user"},
    {"--bb", Takes::kValue, Handling::kRefused, "stage data in the script"},
    {"--bbf", Takes::kValue, Handling::kRefused, "stage data in the script"},
    {"--tres-per-task", Takes::kValue, Handling::kRefused,
     "use --gpus-per-task and -c/--cpus-per-task"},
    {"--tres-bind", Takes::kValue, Handling::kRefused, "use --gpu-bind"},
    {"-s,--oversubscribe", Takes::kFlag, Handling::kRefused,
     "jobs share nodes but never CPUs or GPUs; ask for fewer"},
    {"--contiguous", Takes::kFlag, Handling::kRefused,
     "use --switches=1 for nodes under one leaf switch"},
    {"--reboot", Takes::kFlag, Handling::kRefused,
     "nodes are never rebooted for jobs; leave it out"},
    {"--spread-job", Takes::kFlag, Handling::kRefused,
     "jobs are packed under the fewest switches; use -w to name nodes"},
    {"--use-min-nodes", Takes::kFlag, Handling::kRefused, "-N MIN-MAX always gets MIN nodes"},
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
    for (const SbatchOption& u : kNotImplemented) {
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

// An option that takes a value into `field`; as with sbatch, a later
// occurrence wins over an earlier one.
template <typename Field>
void AddValue(CLI::App& command, const std::string& group, std::string names, Field& field,
              std::string type, std::string help) {
  command.add_option(std::move(names), field, std::move(help))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->type_name(std::move(type))
      ->group(group);
}

// -N N or -N MIN-MAX, into nodes and nodes_max.
void AddNodeCount(CLI::App& command, JobOptions& o, const std::string& group) {
  command
      .add_option_function<std::string>(
          "-N,--nodes",
          [&o](const std::string& text) {
            absl::StatusOr<NodeRange> range = ParseNodeRange(text);
            if (!range.ok()) throw CLI::ValidationError(std::string(range.status().message()));
            o.nodes = range->min;
            o.nodes_max = range->max;
          },
          "nodes of the job (default 1); with MIN-MAX, MIN of them (the job starts when MIN are "
          "free and is not grown)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->type_name("N[-MAX]")
      ->group(group);
}

// pyxis's options, with its names and words (docs/containers.md): they
// shape the container of the job's steps; the batch script runs on the host.
void AddContainerOptions(CLI::App& command, ContainerOptions& c) {
  const std::string group = "Container options (as pyxis's)";
  auto value = [&](std::string names, std::optional<std::string>& field, std::string type,
                   std::string help) {
    AddValue(command, group, std::move(names), field, std::move(type), std::move(help));
  };
  // --x and --no-x set one field; the later on the line wins.
  auto both = [&](const std::string& name, const std::string& no_name, std::optional<bool>& field,
                  std::string help, std::string no_help) {
    command
        .add_flag_callback(
            name, [&field] { field = true; }, std::move(help))
        ->group(group);
    command
        .add_flag_callback(
            no_name, [&field] { field = false; }, std::move(no_help))
        ->group(group);
  };
  value("--container-image", c.image, "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
        "run the steps' ranks in a container of this image: from a registry "
        "(nvcr.io#nvidia/pytorch:24.07-py3, docker://ubuntu:24.04), a squashfs file (*.sqsh) "
        "or an OCI layout; cached on each node");
  value("--container-mounts", c.mounts, "SRC:DST[:FLAGS][,...]",
        "bind mounts into the container, flags joined by + (ro, rw, bind, nosuid, ...): "
        "/lustre/data:/data:ro,/scratch:/scratch");
  value("--container-workdir", c.workdir, "PATH",
        "working directory inside the container (default: the job's when the container has "
        "it, else the image's)");
  value("--container-name", c.name, "NAME[:auto|create|exec|no_exec|no_create]",
        "keep the container under NAME on each node for the job's later steps, which join it "
        "while a step runs in it (auto: join, reuse or make it; create: make it afresh; exec: "
        "join only; no_exec: never join; no_create: join or reuse only)");
  value("--container-save", c.save, "PATH",
        "once the step's ranks have ended, save its container's root to this squashfs file "
        "(made by the node of rank 0, as you)");
  value("--container-env", c.env, "NAME[,NAME...]",
        "variables whose values on the host win over the image's (by default the image's win)");
  both("--container-mount-home", "--no-container-mount-home", c.mount_home,
       "mount your home directory in the container", "do not (the default)");
  both("--container-remap-root", "--no-container-remap-root", c.remap_root,
       "run as root inside the container (a user namespace: no more rights outside)",
       "run as yourself inside (the default)");
  both("--container-writable", "--container-readonly", c.writable,
       "the container's files may be changed (the default; the image stays as it is)",
       "the container's files are read-only");
  both("--container-entrypoint", "--no-container-entrypoint", c.entrypoint,
       "run the image's entrypoint before the command", "do not (the default)");
}

}  // namespace

std::vector<UnsupportedOption> AddJobOptions(CLI::App& command, JobOptions& o,
                                             std::span<const std::string> words) {
  const std::string group = "Job options (as sbatch's)";
  auto value = [&](std::string names, auto& field, std::string type, std::string help) {
    AddValue(command, group, std::move(names), field, std::move(type), std::move(help));
  };
  auto flag = [&](std::string names, auto&& set, std::string help) {
    command.add_flag_callback(std::move(names), std::forward<decltype(set)>(set), std::move(help))
        ->group(group);
  };
  AddNodeCount(command, o, group);
  value("-n,--ntasks", o.ntasks, "N",
        "ranks in all, spread evenly: a multiple of the nodes (or give --ntasks-per-node)");
  value("--ntasks-per-node", o.tasks_per_node, "N", "ranks per node (default 1)");
  value("-c,--cpus-per-task", o.cpus_per_task, "N", "CPUs per rank (default 1)");
  value("--gpus-per-node", o.gpus_per_node, "N", "GPUs per node (default 0)");
  value("--gres", o.gres, "gpu[:TYPE][:N]",
        "N GPUs per node (1 when left out), of TYPE only when given (a node's Gres=gpu:TYPE:N)");
  value("-G,--gpus", o.gpus, "[TYPE:]N",
        "GPUs in all, spread evenly over the nodes (a multiple of -N), of TYPE when given");
  value("--gpus-per-task", o.gpus_per_task, "N", "GPUs per rank: N × --ntasks-per-node per node");
  value("--cpus-per-gpu", o.cpus_per_gpu, "N",
        "CPUs per GPU: each rank gets N × the node's GPUs ÷ its ranks (instead of -c)");
  value("--mem", o.memory, "SIZE",
        "memory per node: MB, or a number with K, M, G or T (500G, 500GB)");
  value("--mem-per-gpu", o.mem_per_gpu, "SIZE", "memory per GPU: SIZE × the node's GPUs per node");
  value("--mem-per-cpu", o.mem_per_cpu, "SIZE", "memory per CPU: SIZE × the node's CPUs per node");
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
  // Slurm's --exclusive[=user|mcs|topo]: a value only after `=`, so that
  command
      .add_flag("--immediate{1}", o.immediate,
                "give up (and cancel the job) unless it starts within SECONDS (default 1)")
      ->each([](const std::string& seconds) {
        const bool digits =
            !seconds.empty() && seconds.size() <= 6 &&
            std::ranges::all_of(seconds, [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) {
          throw CLI::ValidationError("--immediate",
                                     fmt::format("\"{}\" is no count of seconds; write "
                                                 "--immediate or --immediate=30",
                                                 seconds));
        }
      })
      ->group(group);
  // -I alone: one second (an attached count, -I30, is getopt's and not taken).
  command
      .add_flag_callback(
          "-I", [&o] { o.immediate = "1"; }, "--immediate")
      ->group(group);
  // As --exclusive, a value only after `=`.
  command
      .add_flag("--propagate{ALL}", o.propagate,
                "the resource limits (ulimit -S) the ranks take from here: ALL (the default), "
                "NONE, or a list of AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK")
      ->each([](const std::string& list) {
        if (absl::Status s = launch::CheckPropagate(list); !s.ok()) {
          throw CLI::ValidationError("--propagate", std::string(s.message()));
        }
      })
      ->group(group);
  // `sbatch --exclusive job.sh` keeps job.sh as the script.
  command
      .add_flag("--exclusive{node}", o.exclusive_mode,
                "whole nodes only, shared with no other job; =topo: whole blocks (or leaf "
                "switches) too, where no other job runs while this one does")
      ->each([&o](const std::string& mode) {
        if (mode == "topo") {
          o.exclusive_topo = true;
        } else if (mode == "user" || mode == "mcs") {
          throw CLI::ValidationError(
              "--exclusive", fmt::format("--exclusive={} is not supported: jobs never share CPUs "
                                         "or GPUs; use --exclusive for whole nodes",
                                         mode));
        } else if (mode != "node") {
          throw CLI::ValidationError(
              "--exclusive", fmt::format("no mode \"{}\"; use --exclusive, or --exclusive=topo "
                                         "for whole blocks",
                                         mode));
        }
        o.exclusive = true;
      })
      ->group(group);
  value("--switches", o.switches, "N[@TIME]",
        "at most N leaf switches; with @TIME, wait at most that long for them");
  value("--segment", o.segment, "S",
        "the gang in pieces of S nodes, each inside one NVLink block (-N a multiple of S); node "
        "ranks of a piece are consecutive");
  flag(
      "--spread-segments", [&o] { o.spread_segments = true; },
      "each --segment in a block of its own (default: as few blocks as possible)");
  flag(
      "--requeue", [&o] { o.requeue = true; },
      "start the job again if a node fails or it is preempted");
  flag(
      "--no-requeue", [&o] { o.requeue = false; }, "never start the job again (the default)");
  flag(
      "-O,--overcommit", [&o] { o.overcommit = true; },
      "a node holds --cpus-per-task CPUs however many tasks it runs, and they share them (more "
      "than one task a CPU)");
  flag(
      "-k,--no-kill", [&o] { o.no_kill = true; },
      "a batch job or allocation goes on without a node that fails, for its next steps");
  value("--spares", o.spares, "N",
        "hold N more nodes idle inside the job's leaf or block; a node that fails is replaced "
        "by one and the job goes on (at most one per node of the job)");
  value("--restart-policy", o.restart_policy, "job|step",
        "what a repair from a spare starts again: job (the batch script or the command, the "
        "default) or step (only the steps that ran on the lost node end)");
  value("--max-restarts", o.max_restarts, "N",
        "start the job again at most N times after node failures (implies --requeue; default: "
        "the cluster's MaxBatchRequeue)");
  value("--export", o.export_env, "ALL|NONE|VARS",
        "environment of the ranks: ALL (the default: all of this one), NONE, or NAME[=VALUE],... "
        "(only those); ALL,NAME=VALUE adds to all");
  value("-C,--constraint", o.constraint, "FEATURES",
        "features every node must have, joined by , or &");
  value("-w,--nodelist", o.nodelist, "HOSTLIST",
        "nodes that must be in the job (a hostlist: gpu[001-004])");
  value("-x,--exclude", o.exclude, "HOSTLIST", "nodes that must not be (a hostlist)");
  value("--begin", o.begin, "TIME",
        "start no sooner than TIME: YYYY-MM-DD[THH:MM[:SS]] (local), today, midnight, "
        "now+N[minutes|hours|days|weeks] (such as now+1hour)");
  value("--deadline", o.deadline, "TIME",
        "cancel the job once it cannot end by TIME with its time limit (same forms as --begin)");
  value("--comment", o.comment, "TEXT", "a note kept with the job (cohort show job)");
  value("--wckey", o.wckey, "KEY", "a workload key kept with the job, as sacct's WCKey");
  value("--mail-type", o.mail_type, "TYPES", "kept with the job; no mail is sent");
  value("--mail-user", o.mail_user, "ADDRESS", "kept with the job; no mail is sent");
  value("--signal", o.signal, "[B:]SIG[@SECONDS]",
        "warn the ranks with SIG (a name such as USR1, or a number) SECONDS (default 90) before "
        "the time limit; B: only the batch script (rank 0); none: no warning (default: USR1@90)");
  value("--gpu-bind", o.gpu_bind, "ordered|closest|single:N|none",
        "GPUs each rank sees: with a GPU per rank, all of the job's GPUs on the node with its own "
        "at position LOCAL_RANK (ordered, the default: torch.cuda.set_device(LOCAL_RANK) picks "
        "its own), "
        "only its own (closest), N ranks per GPU (single:N), or all in index order (none)");
  value("--cpu-bind", o.cpu_bind, "cores|threads|numa|none",
        "CPUs each rank is bound to, next to its GPU: whole cores (the default), threads, its "
        "whole NUMA node, or none");
  value("--hint", o.hint, "nomultithread|multithread|compute_bound",
        "as --cpu-bind: whole cores (nomultithread, compute_bound) or threads (multithread)");
  value("--mem-bind", o.mem_bind, "local|none",
        "memory of each rank on its GPU's NUMA node (local, the default) or anywhere (none)");
  value("--reservation", o.reservation, "NAME",
        "run in that reservation: on its nodes, inside its window (scontrol show reservation)");
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
  flag(
      "-H,--hold", [&o] { o.hold = true; },
      "submit the job held: it is not started until cohort release");
  flag(
      "--test-only", [&o] { o.test_only = true; },
      "check the job and say where it would run now; submit nothing");
  flag(
      "--parsable", [&o] { o.parsable = true; }, "print only the job id");

  AddContainerOptions(command, o.container);

  std::vector<UnsupportedOption> unsupported;
  if (!MayNameUnsupported(words)) return unsupported;
  for (const SbatchOption& u : kNotImplemented) {
    CLI::Option* option =
        u.takes == Takes::kValue ? command.add_option(u.names) : command.add_flag(u.names);
    option->group("");  // hidden from --help
    if (u.takes == Takes::kValue) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    unsupported.push_back({option, &u, LongName(u.names)});
  }
  return unsupported;
}

std::span<const SbatchOption> NotImplementedOptions() { return kNotImplemented; }

absl::Status CheckNotImplemented(const std::vector<UnsupportedOption>& unsupported) {
  for (const UnsupportedOption& u : unsupported) {
    if (u.option->count() > 0 && u.entry->handling == Handling::kRefused) {
      return absl::InvalidArgumentError(
          fmt::format("{} is not supported; {}", u.name, u.entry->text));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::cli
