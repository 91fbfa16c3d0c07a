// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

#include "spec/job_options.h"

/// The table of sbatch's options as CLI11 options: those Cohort supports,
/// bound to JobOptions' fields, and those it does not implement, which are
/// registered only when a command line may name one.
namespace cohort::cli {

/// How an sbatch option that Cohort does not implement is met.
enum class Handling {
  kRefused,   ///< it changes where, when or how a job runs: an error with the alternative
  kHarmless,  ///< accepted and dropped: it changes nothing Cohort does
};
/// Whether an option takes a value (`--mail-type END`, `--mail-type=END`)
/// or none (`--nice`; a value only after `=`).
enum class Takes { kValue, kFlag };

/// One sbatch option that Cohort does not implement.
struct SbatchOption {
  const char* names;  ///< "-L,--licenses"
  Takes takes;
  Handling handling;
  const char* text;  ///< kRefused: the closest alternative; otherwise why it can be dropped
};
/// Every one of them, in the order docs/slurm.md lists them.
[[nodiscard]] std::span<const SbatchOption> NotImplementedOptions();

/// An option of NotImplementedOptions registered on a command.
struct UnsupportedOption {
  CLI::Option* option = nullptr;
  const SbatchOption* entry = nullptr;
  std::string name;  ///< e.g. "--mail-user"
};

/// Adds the job options to `command`, bound to `options`, and the sbatch
/// options Cohort does not implement as hidden ones when one of `words`
/// (what `command` will parse) may name one. Returns the latter, to ask
/// after parsing which were given (CheckNotImplemented). Registering all
/// seventy takes CLI11 most of a millisecond (each new option is compared
/// with every one before it), on every submission and for every directive
/// line, and a command line that names none needs none of them.
std::vector<UnsupportedOption> AddJobOptions(CLI::App& command, JobOptions& options,
                                             std::span<const std::string> words);

/// After a parse: InvalidArgument for the first kRefused option given,
/// naming it and its alternative.
[[nodiscard]] absl::Status CheckNotImplemented(const std::vector<UnsupportedOption>& unsupported);

}  // namespace cohort::cli
