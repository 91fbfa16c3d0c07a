// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "job_options.h"

/// The table of sbatch's options as CLI11 options: those Cohort supports,
/// bound to JobOptions' fields, and those it does not support yet, which are
/// registered only when a command line may name one.
namespace cohort::cli {

/// An sbatch option Cohort recognises but does not support yet: given, it is
/// warned about and ignored, never silently dropped.
struct UnsupportedOption {
  CLI::Option* option = nullptr;
  std::string name;  ///< e.g. "--mail-user"
};

/// Adds the job options to `command`, bound to `options`, and the sbatch
/// options not supported yet as hidden ones when one of `words` (what
/// `command` will parse) may name one. Returns the latter, to ask after
/// parsing which were given (GivenUnsupported). Registering all seventy
/// takes CLI11 most of a millisecond (each new option is compared with
/// every one before it), on every submission and for every directive line,
/// and a command line that names none needs none of them.
std::vector<UnsupportedOption> AddJobOptions(CLI::App& command, JobOptions& options,
                                             std::span<const std::string> words);

/// The names of the unsupported options that the last parse saw.
[[nodiscard]] std::vector<std::string> GivenUnsupported(
    const std::vector<UnsupportedOption>& unsupported);

}  // namespace cohort::cli
