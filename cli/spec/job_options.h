// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"

/// The job options of `cohort submit` and `cohort run`, named after sbatch's,
/// from the command line and from a script's #SBATCH / #COHORT directives.
namespace cohort::cli {

/// pyxis's --container-* options (docs/containers.md), as typed.
struct ContainerOptions {
  std::optional<std::string> image;
  std::optional<std::string> mounts;
  std::optional<std::string> workdir;
  std::optional<std::string> name;
  std::optional<std::string> save;
  std::optional<std::string> env;
  std::optional<bool> mount_home;
  std::optional<bool> remap_root;
  std::optional<bool> writable;
  std::optional<bool> entrypoint;
};

/// What the user asked for; an option not given is absent, so that the
/// command line can be laid over the directives.
struct JobOptions {
  std::optional<int> nodes;      ///< -N N, or MIN of -N MIN-MAX
  std::optional<int> nodes_max;  ///< MAX of -N MIN-MAX
  std::optional<int> ntasks;
  std::optional<int> tasks_per_node;
  std::optional<int> cpus_per_task;
  std::optional<int> gpus_per_node;
  std::optional<std::string> gres;
  std::optional<std::string> gpus;  ///< -G/--gpus: N or TYPE:N in all
  std::optional<int> gpus_per_task;
  std::optional<int> cpus_per_gpu;
  std::optional<std::string> memory;
  std::optional<std::string> mem_per_gpu;
  std::optional<std::string> mem_per_cpu;
  std::optional<std::string> time;
  std::optional<std::string> partition;
  std::optional<std::string> account;
  std::optional<std::string> job_name;
  std::optional<std::string> output;
  std::optional<std::string> error;
  std::optional<std::string> chdir;
  std::optional<std::string> open_mode;  ///< append | truncate
  std::optional<std::string> switches;
  std::optional<int> segment;  ///< --segment=S: nodes per segment
  bool spread_segments = false;
  std::optional<std::string> export_env;
  std::optional<std::string> constraint;
  std::optional<std::string> nodelist;
  std::optional<std::string> exclude;
  std::optional<bool> requeue;
  bool no_kill = false;             ///< -k/--no-kill: go on without a lost node
  bool overcommit = false;          ///< -O/--overcommit: more than one task a CPU
  std::optional<int> max_restarts;  ///< --max-restarts=N (implies --requeue unless --no-requeue)
  std::optional<int> spares;        ///< --spares=N: spare nodes held inside the gang's domain
  std::optional<std::string> restart_policy;  ///< --restart-policy=job|step
  std::optional<std::string> signal;          ///< --signal=[R:|B:]SIG[@SECONDS] or none
  std::optional<std::string> gpu_bind;        ///< ordered | closest | single:N | none
  std::optional<std::string> cpu_bind;        ///< cores | threads | numa | none
  std::optional<std::string> hint;      ///< --hint: nomultithread | multithread | compute_bound
  std::optional<std::string> mem_bind;  ///< local | none
  std::optional<std::string> qos;
  std::optional<std::string> reservation;  ///< --reservation
  std::optional<std::string> array;        ///< --array as typed; the controller parses it
  std::optional<std::string> dependency;   ///< --dependency as typed; the controller parses it
  std::optional<std::string> kill_on_invalid_dep;  ///< yes | no
  bool hold = false;
  bool exclusive = false;
  bool exclusive_topo = false;  ///< --exclusive=topo (sets exclusive too)
  std::string exclusive_mode;   ///< what --exclusive was given: node, topo, …
  bool test_only = false;
  bool parsable = false;
  std::optional<std::string> begin;     ///< --begin, as typed
  std::optional<std::string> deadline;  ///< --deadline, as typed
  std::optional<std::string> comment;
  std::optional<std::string> wckey;
  std::optional<std::string> mail_type;
  std::optional<std::string> mail_user;
  std::optional<std::string> wrap;  ///< --wrap: the command a generated script runs
  bool wait = false;                ///< -W/--wait: return when the job ends, with its status
  /// --propagate[=LIST]: the resource limits the ranks take from here (ALL,
  /// the default; NONE; or names such as NOFILE,CORE).
  std::string propagate = "ALL";
  std::string immediate;       ///< -I/--immediate[=SECONDS]: "" not given; digits (1 when bare)
  ContainerOptions container;  ///< the steps' container
};

/// The container the options ask for: their values checked
/// (container_options.h, image_ref.h), then PYXIS_CONTAINER_* variables of
/// this environment for the options not given, as pyxis reads them.
/// InvalidArgument names the option and the accepted form.
[[nodiscard]] absl::StatusOr<v1::ContainerSpec> BuildContainerSpec(const ContainerOptions& options);

/// Sets every option that `into` lacks from `from`. Flags are or-ed.
void FillUnset(JobOptions& into, const JobOptions& from);

/// Slurm's input environment variables of sbatch (`prefix` "SBATCH_") or
/// salloc ("SALLOC_"): each one set stands for its option (SBATCH_ACCOUNT
/// for --account, SBATCH_TIMELIMIT for --time, …; docs/slurm.md lists
/// them) and sets it where the command line did not, so that it wins over
/// a script's directives (applied after) as in Slurm. `environment` is
/// this process's (null: `environ`). InvalidArgument names the variable and
/// what is wrong with its value.
[[nodiscard]] absl::Status ApplyInputVariables(std::string_view prefix, JobOptions& options,
                                               const char* const* environment = nullptr);

/// Reads the #SBATCH and #COHORT directives of a script into `options`, as
/// if given on a command line: first every #SBATCH line, then every #COHORT
/// line (so #COHORT wins), a later line overriding an earlier one. Warnings
/// (unsupported options, directives that are not read) go to stderr as
/// `cohort: warning: FILE:LINE: ...`. InvalidArgument names the line of an
/// unknown option, a missing or malformed value, or an unmatched quote.
[[nodiscard]] absl::Status ApplyDirectives(std::string_view script, const std::string& path,
                                           JobOptions& options);

/// Checks the options and turns them into a JobSpec, with `default_name`
/// when -J is not given. Sets user_name, submit_dir and work_dir (-D made
/// absolute, else the current directory) and the exported environment
/// (--export). Leaves argv and script to the caller. InvalidArgument names
/// the option and how to fix it.
[[nodiscard]] absl::StatusOr<v1::JobSpec> BuildJobSpec(const JobOptions& options,
                                                       const std::string& default_name);

/// Prints a request one field a line, for --test-only.
void PrintJobSpec(const v1::JobSpec& spec, std::ostream& out);
/// Prints the controller's answer to a --test-only request: where the job
/// would run now, or why not.
void PrintTestOnlyAnswer(const v1::SubmitJobResponse& response, std::ostream& out);

/// Splits a command's positional words (CLI11's remaining()) into the
/// command and whether it followed `--`; InvalidArgument for an unknown
/// option before it, naming `verb`'s --help.
struct Command {
  std::vector<std::string> words;  ///< empty: none given
  bool after_dashes = false;       ///< given as `-- CMD ARGS...`
};
[[nodiscard]] absl::StatusOr<Command> SplitCommand(const std::vector<std::string>& remaining,
                                                   std::string_view verb);

/// Makes `command` stop at its first positional word, leaving it and what
/// follows to remaining() (sbatch passes options after the script to the
/// script), and shows `usage` as its positional in --help.
void TakeCommandVerbatim(CLI::App& command, std::string usage, std::string description);

/// Quotes a word for a POSIX shell when it needs quoting.
[[nodiscard]] std::string ShellQuote(std::string_view word);

}  // namespace cohort::cli
