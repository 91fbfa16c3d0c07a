// SPDX-License-Identifier: Apache-2.0
#pragma once

/// The command line of cohort-image.
namespace cohort::image {

/// Exit statuses of cohort-image.
inline constexpr int kExitImageError = 1;  ///< the image or registry failed the pull
inline constexpr int kExitUsage = 2;       ///< the command line is wrong

/// Runs `cohort-image pull ...`: parses the command line, pulls, prints the
/// image's JSON on stdout (0) or one line on stderr naming the image and the
/// cause (kExitImageError; kExitUsage for a bad command line or reference).
/// Call once, from main, before any thread starts.
[[nodiscard]] int RunImageCommand(int argc, char** argv);

}  // namespace cohort::image
