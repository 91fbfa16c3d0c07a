// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/launch_env.h"

/// The launch file: everything cohort-stepd needs to start one job's ranks on
/// one node, written by the agent as `launch.json` into the launch's spool
/// folder. Pure: no I/O; safe from any thread.
namespace cohort::step {

/// The most ranks one node starts for one job; a launch asking for more is
/// refused rather than allowed to stall the node.
inline constexpr int kMaxRanksPerNode = 1024;

/// One job's launch on one node, in the agent's terms (the proto Launch,
/// without the wire).
struct LaunchPlan {
  launch::LaunchContext context;  ///< node_name, ranks and environment
  std::vector<std::string> argv;  ///< the program and its arguments
  std::string script;             ///< a batch script's text; when set it replaces argv[0]
  std::string work_dir;           ///< where the ranks start; must exist
  std::string output;             ///< stdout pattern (ExpandOutputPattern); empty: cohort-%j.out
  std::string error;              ///< stderr pattern; empty: the same file as stdout
};

/// How the ranks' output files are opened (sbatch's --open-mode).
enum class OpenMode { kAppend, kTruncate };

/// One local rank of a launch.
struct RankLaunch {
  int rank = 0;                  ///< global
  std::vector<std::string> env;  ///< NAME=value, ready for execve
  std::string output;            ///< stdout file
  std::string error;             ///< stderr file; empty: the stdout file
};

/// What cohort-stepd runs. The program is `script_path` when set (with
/// argv[1..] as its arguments), else argv[0], looked up in `search_path`
/// (the job's PATH, relative to `work_dir`) when it has no slash.
struct LaunchFile {
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string node;
  std::vector<std::string> argv;
  std::string script_path;
  std::string search_path;
  std::string work_dir;
  OpenMode open_mode = OpenMode::kAppend;
  std::vector<RankLaunch> ranks;  ///< in rank order
  std::string agent_socket;       ///< the agent's datagram socket; empty: none
};

/// Checks a plan and turns it into a launch file: each local rank's
/// environment (BuildRankEnvironment) and output files (patterns expanded,
/// relative to the work dir). `script_path` is where the caller wrote
/// plan.script (ignored without a script). InvalidArgument, with the node's
/// name first, for a plan that cannot run anywhere: rank counts out of range,
/// nothing to run, no working directory.
[[nodiscard]] absl::StatusOr<LaunchFile> PlanLaunch(const LaunchPlan& plan, int attempt,
                                                    const std::string& script_path,
                                                    const std::string& agent_socket);

/// The launch file as JSON text.
[[nodiscard]] std::string LaunchFileToJson(const LaunchFile& file);

/// Parses `LaunchFileToJson`'s text. InvalidArgument for text that is not
/// JSON or lacks a field.
[[nodiscard]] absl::StatusOr<LaunchFile> ParseLaunchFile(std::string_view text);

/// A launch's spool folder name, `job-<id>.<attempt>`.
[[nodiscard]] std::string LaunchFolderName(std::int64_t job_id, int attempt);

/// The job id and attempt of a folder name; nullopt for any other name.
struct LaunchId {
  std::int64_t job_id = 0;
  int attempt = 0;
  friend auto operator<=>(const LaunchId&, const LaunchId&) = default;
};
[[nodiscard]] std::optional<LaunchId> ParseLaunchFolderName(std::string_view name);

}  // namespace cohort::step
