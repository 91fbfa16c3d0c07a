// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include <CLI/CLI.hpp>

#include "commands/commands.h"

/// Slurm's commands as front-ends of `cohort`: the same binary, run under
/// one of their names (a link in PREFIX/libexec/cohort/slurm/, a folder a
/// user puts first on PATH), takes that command's options and prints its
/// formats, so that scripts and tools written for Slurm (submitit,
/// Lightning, sbatch scripts calling srun) run unchanged.
namespace cohort::cli {

/// The commands, in the order docs/slurm.md lists them: sbatch, srun,
/// salloc, squeue, scancel, sinfo, sacct, sstat, scontrol, sprio, sshare,
/// sacctmgr, sreport.
[[nodiscard]] std::span<const std::string_view> SlurmCommandNames();

/// Whether `program` (argv[0]'s file name) is one of them.
[[nodiscard]] bool IsSlurmCommand(std::string_view program);

/// Makes `app` (the root, named `program`) that command: its options and
/// the callback that runs it and stores the exit status in `exit_code`.
/// `words` are the arguments after the program's name.
void AddSlurmCommand(CLI::App& app, std::string_view program, int& exit_code, CommandWords words);

/// `args` (the arguments after the program's name) with each long option
/// that is a unique prefix of one of `app`'s written out whole, as getopt
/// takes them: `squeue --job=12` is `--jobs=12`. An exact name wins; a
/// prefix of several is refused, naming them. The words after `--`, and
/// for sbatch, srun and salloc (`stop_at_command`) those from the first
/// that is no option or an option's value on, are the user's and kept.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ExpandLongOptions(
    const CLI::App& app, std::span<const std::string> args, bool stop_at_command);

/// Whether the front-end `program` takes a command (and its arguments)
/// after its options: sbatch, srun, salloc.
[[nodiscard]] bool TakesCommand(std::string_view program);

/// The exit status Slurm's commands use for a status of a `cohort` verb: 0
/// stays 0, any failure (Cohort's 2 for a mistake in the command line too)
/// is 1.
[[nodiscard]] int SlurmStatus(int cohort_status);

/// Registers Slurm flags `names` that Cohort does not do on a front-end:
/// given, the command line is refused with `why`, the alternative.
void RefuseFlags(CLI::App& app, std::string names, std::string why);

/// Each front-end, registered on the root app. sbatch, srun and salloc take
/// the job options (their `words` decide which sbatch options need
/// registering).
void AddSbatchCommand(CLI::App& app, int& exit_code, CommandWords words);
void AddSrunCommand(CLI::App& app, int& exit_code, CommandWords words);
void AddSallocCommand(CLI::App& app, int& exit_code, CommandWords words);
void AddSqueueCommand(CLI::App& app, int& exit_code);
void AddScancelCommand(CLI::App& app, int& exit_code);
void AddSinfoCommand(CLI::App& app, int& exit_code);
void AddSacctCommand(CLI::App& app, int& exit_code);
void AddSstatCommand(CLI::App& app, int& exit_code);
void AddScontrolCommand(CLI::App& app, int& exit_code);
void AddSprioCommand(CLI::App& app, int& exit_code);
void AddSshareCommand(CLI::App& app, int& exit_code);
void AddSacctmgrCommand(CLI::App& app, int& exit_code);
void AddSreportCommand(CLI::App& app, int& exit_code);

}  // namespace cohort::cli
