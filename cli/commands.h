// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>

/// The `cohort` command's verbs. Each Add* registers its subcommands on
/// `app`; when one runs, it stores the process exit status in `exit_code`.
namespace cohort::cli {

/// `cohort config check`.
void AddConfigCommands(CLI::App& app, int& exit_code);
/// `cohort topology show`.
void AddTopologyCommands(CLI::App& app, int& exit_code);
/// `cohort hostlist expand|compress`.
void AddHostlistCommands(CLI::App& app, int& exit_code);
/// `cohort place`.
void AddPlaceCommand(CLI::App& app, int& exit_code);

}  // namespace cohort::cli
