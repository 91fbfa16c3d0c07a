// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

/// The `cohort` command's verbs. Each Add* registers its subcommands on
/// `app`; when one runs, it stores the process exit status in `exit_code`.
namespace cohort::cli {

/// A command line's words after the program's name: the verb, then its
/// options and arguments.
using CommandWords = std::span<const std::string>;

/// Registers the verbs of `cohort` on `app`. When the verb (the first of
/// `words`) names one, only the group that defines it: building all of
/// them, with their options and help, is a few milliseconds of every
/// command. Anything else (--help, --version, a typo) gets them all, so that
/// help lists every verb and errors can name them.
void AddCommands(CLI::App& app, int& exit_code, CommandWords words);
/// Every verb AddCommands knows, in the order help lists them.
[[nodiscard]] std::vector<std::string_view> VerbNames();

/// `cohort config check`.
void AddConfigCommands(CLI::App& app, int& exit_code);
/// `cohort topology` (live, through AddLiveTopology) and `cohort topology
/// show` (offline, from files).
void AddTopologyCommands(CLI::App& app, int& exit_code);
/// Makes `cohort topology` without a subcommand print the live tree.
void AddLiveTopology(CLI::App& topology, int& exit_code);
/// `cohort hostlist expand|compress`.
void AddHostlistCommands(CLI::App& app, int& exit_code);
/// `cohort hostlist expand`: prints every name of the hostlists, one a
/// line; 1 (and the error) for one that does not parse.
[[nodiscard]] int ExpandHostlists(const std::vector<std::string>& lists);
/// `cohort hostlist compress`: prints the shortest hostlist of the names.
[[nodiscard]] int CompressHostlists(const std::vector<std::string>& items);
/// `cohort show` as `scontrol show`: job [JOB] (every job when none), node
/// [NAME], partition [NAME], hostnames [HOSTLIST], hostlist NAMES.
void AddScontrolShow(CLI::App& scontrol, int& exit_code);
/// `cohort place`.
void AddPlaceCommand(CLI::App& app, int& exit_code);

// The online commands: each talks to cohort-controller (controller_client.h).

/// `cohort submit`: a batch script or a command, as one job. `words` are
/// what it will parse (the words after the verb; see AddJobOptions).
void AddSubmitCommand(CLI::App& app, int& exit_code, CommandWords words);
/// `cohort run`: submit, wait, stream the ranks' output, exit with the
/// job's status. `words` as for AddSubmitCommand.
void AddRunCommand(CLI::App& app, int& exit_code, CommandWords words);
/// `cohort alloc`: an interactive allocation, as salloc. `words` as for
/// AddSubmitCommand.
void AddAllocCommand(CLI::App& app, int& exit_code, CommandWords words);
/// `cohort queue`: the jobs, as squeue.
void AddQueueCommand(CLI::App& app, int& exit_code);
/// `cohort history`: finished jobs from the controller's records, as sacct.
void AddHistoryCommand(CLI::App& app, int& exit_code);
/// `cohort show job|node`: every detail, as scontrol show.
void AddShowCommand(CLI::App& app, int& exit_code);
/// `cohort cancel`: cancel jobs or signal their ranks, as scancel.
void AddCancelCommand(CLI::App& app, int& exit_code);
/// `cohort hold`, `release`, `requeue` and `checkpoint-done` (ControlJobs).
void AddControlCommands(CLI::App& app, int& exit_code);
/// `cohort why`: what keeps a job from starting, in words.
void AddWhyCommand(CLI::App& app, int& exit_code);
/// `cohort priority`: each pending job's priority factors, as sprio.
void AddPriorityCommand(CLI::App& app, int& exit_code);
/// `cohort shares`: the accounts' fair shares and usage, as sshare.
void AddSharesCommand(CLI::App& app, int& exit_code);
/// `cohort nodes`: the nodes' states per partition, as sinfo.
void AddNodesCommand(CLI::App& app, int& exit_code);
/// `cohort drain` and `cohort resume`.
void AddDrainCommands(CLI::App& app, int& exit_code);
/// `cohort token`: a token for the REST API, as scontrol token.
void AddTokenCommand(CLI::App& app, int& exit_code);
/// `cohort reconfigure`: the controller rereads its files, as scontrol
/// reconfigure.
void AddReconfigureCommand(CLI::App& app, int& exit_code);

}  // namespace cohort::cli
