// SPDX-License-Identifier: Apache-2.0
#include "launch_file.h"

#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"

namespace cohort::step {
namespace {

constexpr int kLaunchFileVersion = 1;
constexpr std::string_view kDefaultOutput = "cohort-%j.out";
// What execvp searches when the environment has no PATH.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

absl::Status PlanFailure(const std::string& node, std::string_view text) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", node, text));
}

std::string JoinWorkPath(std::string_view dir, std::string_view name) {
  if (name.starts_with('/') || dir.empty()) return std::string(name);
  if (dir.ends_with('/')) return fmt::format("{}{}", dir, name);
  return fmt::format("{}/{}", dir, name);
}

std::string JobPathVariable(const launch::LaunchContext& context) {
  std::string_view path = kDefaultPath;
  for (const launch::EnvVar& var : context.base_env) {
    if (var.name == "PATH") path = var.value;
  }
  return std::string(path);
}

absl::Status CheckPlan(const LaunchPlan& plan) {
  const launch::LaunchContext& context = plan.context;
  const std::string& node = context.node_name;
  if (context.tasks_per_node < 1 || context.tasks_per_node > kMaxRanksPerNode) {
    return PlanFailure(node,
                       fmt::format("the launch asks for {} ranks per node; a node runs 1 to {}",
                                   context.tasks_per_node, kMaxRanksPerNode));
  }
  if (context.num_nodes < 1 || context.node_rank < 0 || context.node_rank >= context.num_nodes) {
    return PlanFailure(node, fmt::format("node rank {} is outside a gang of {} nodes",
                                         context.node_rank, context.num_nodes));
  }
  if (static_cast<std::int64_t>(context.num_nodes) * context.tasks_per_node > INT_MAX) {
    return PlanFailure(node, fmt::format("{} nodes of {} ranks is more ranks than a job can have",
                                         context.num_nodes, context.tasks_per_node));
  }
  if (plan.argv.empty() && plan.script.empty()) {
    return PlanFailure(node, "nothing to run: the launch has neither a program nor a script");
  }
  if (plan.work_dir.empty()) return PlanFailure(node, "the launch has no working directory");
  return absl::OkStatus();
}

std::string_view OpenModeName(OpenMode mode) {
  return mode == OpenMode::kTruncate ? "truncate" : "append";
}

}  // namespace

absl::StatusOr<LaunchFile> PlanLaunch(const LaunchPlan& plan, int attempt,
                                      const std::string& script_path,
                                      const std::string& agent_socket) {
  if (absl::Status status = CheckPlan(plan); !status.ok()) return status;
  const launch::LaunchContext& context = plan.context;
  LaunchFile file;
  file.job_id = context.job_id;
  file.attempt = attempt;
  file.node = context.node_name;
  file.argv = plan.argv;
  if (!plan.script.empty()) file.script_path = script_path;
  file.search_path = JobPathVariable(context);
  file.work_dir = plan.work_dir;
  file.agent_socket = agent_socket;
  const std::string output_pattern =
      plan.output.empty() ? std::string(kDefaultOutput) : plan.output;
  file.ranks.reserve(static_cast<std::size_t>(context.tasks_per_node));
  for (int local = 0; local < context.tasks_per_node; ++local) {
    RankLaunch& rank = file.ranks.emplace_back();
    rank.rank = context.node_rank * context.tasks_per_node + local;
    rank.env = launch::BuildRankEnvironment(context, local);
    rank.output = JoinWorkPath(plan.work_dir,
                               launch::ExpandOutputPattern(output_pattern, context, rank.rank));
    if (!plan.error.empty()) {
      rank.error =
          JoinWorkPath(plan.work_dir, launch::ExpandOutputPattern(plan.error, context, rank.rank));
    }
  }
  return file;
}

std::string LaunchFileToJson(const LaunchFile& file) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankLaunch& rank : file.ranks) {
    ranks.push_back(
        {{"rank", rank.rank}, {"env", rank.env}, {"output", rank.output}, {"error", rank.error}});
  }
  const nlohmann::json json = {
      {"version", kLaunchFileVersion},
      {"job_id", file.job_id},
      {"attempt", file.attempt},
      {"node", file.node},
      {"argv", file.argv},
      {"script_path", file.script_path},
      {"search_path", file.search_path},
      {"work_dir", file.work_dir},
      {"open_mode", OpenModeName(file.open_mode)},
      {"ranks", std::move(ranks)},
      {"agent_socket", file.agent_socket},
  };
  // Protobuf strings are UTF-8 already; replace guards against a bug, not
  // users.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

absl::StatusOr<LaunchFile> ParseLaunchFile(std::string_view text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    if (json.at("version").get<int>() != kLaunchFileVersion) {
      return absl::InvalidArgumentError(
          fmt::format("launch file version {} is not {}; cohort-stepd and "
                      "cohort-agent must come "
                      "from the same release",
                      json.at("version").dump(), kLaunchFileVersion));
    }
    LaunchFile file;
    file.job_id = json.at("job_id").get<std::int64_t>();
    file.attempt = json.at("attempt").get<int>();
    file.node = json.at("node").get<std::string>();
    file.argv = json.at("argv").get<std::vector<std::string>>();
    file.script_path = json.at("script_path").get<std::string>();
    file.search_path = json.at("search_path").get<std::string>();
    file.work_dir = json.at("work_dir").get<std::string>();
    const std::string mode = json.at("open_mode").get<std::string>();
    if (mode != "append" && mode != "truncate") {
      return absl::InvalidArgumentError(
          fmt::format("launch file: open_mode {:?} is neither append nor truncate", mode));
    }
    file.open_mode = mode == "truncate" ? OpenMode::kTruncate : OpenMode::kAppend;
    for (const nlohmann::json& entry : json.at("ranks")) {
      RankLaunch& rank = file.ranks.emplace_back();
      rank.rank = entry.at("rank").get<int>();
      rank.env = entry.at("env").get<std::vector<std::string>>();
      rank.output = entry.at("output").get<std::string>();
      rank.error = entry.at("error").get<std::string>();
    }
    file.agent_socket = json.at("agent_socket").get<std::string>();
    return file;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("launch file: {}", e.what()));
  }
}

std::string LaunchFolderName(std::int64_t job_id, int attempt) {
  return fmt::format("job-{}.{}", job_id, attempt);
}

std::optional<LaunchId> ParseLaunchFolderName(std::string_view name) {
  if (!name.starts_with("job-")) return std::nullopt;
  name.remove_prefix(4);
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  LaunchId id;
  const std::string_view job = name.substr(0, dot);
  const std::string_view attempt = name.substr(dot + 1);
  const auto parsed_job = std::from_chars(job.data(), job.data() + job.size(), id.job_id);
  const auto parsed_attempt =
      std::from_chars(attempt.data(), attempt.data() + attempt.size(), id.attempt);
  if (job.empty() || attempt.empty() || parsed_job.ec != std::errc() ||
      parsed_job.ptr != job.data() + job.size() || parsed_attempt.ec != std::errc() ||
      parsed_attempt.ptr != attempt.data() + attempt.size() || id.job_id < 0) {
    return std::nullopt;
  }
  return id;
}

}  // namespace cohort::step
