// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/launch_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/text/hostlist.h"

namespace cohort::launch {
namespace {

using Var = std::pair<std::string_view, std::string>;

constexpr std::string_view kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";

// Slurm prints node lists compressed and sorted whatever order the gang is
// in; launchers (and people) parse it that way.
// Node ranks follow the hostlist's order (node rank i is its i-th name, as
// tools that pick the first name for MASTER_ADDR rely on): folded, in order.
std::string CompressedNodelist(const std::string& nodelist) {
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(nodelist);
  if (!names.ok() || names->empty()) return nodelist;
  return hostlist::CompressInOrder(*names);
}

std::string FirstNode(const std::string& nodelist) {
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(nodelist);
  if (!names.ok() || names->empty()) return {};
  return std::move(names->front());
}

// The variables the launch sets, in the documented order. Sizes are computed
// in 64 bits: the context comes from the network and may be absurd.
std::vector<Var> LaunchVariables(const LaunchContext& context, int local_rank) {
  const bool batch = context.kind == LaunchKind::kBatch;
  const bool step = context.kind == LaunchKind::kStep;
  const std::int64_t tasks = context.tasks_per_node;  // the allocation's, per node
  const std::string nodelist = CompressedNodelist(context.nodelist);
  const std::string job_id = std::to_string(context.job_id);
  const std::string num_nodes = std::to_string(context.num_nodes);
  // The world the ranks belong to: the step's, or the whole gang.
  const std::string world_nodelist = step ? CompressedNodelist(context.step.nodelist) : nodelist;
  const std::string world_nodes = step ? std::to_string(context.step.num_nodes) : num_nodes;
  const std::string node_rank = std::to_string(step ? context.step.node_index : context.node_rank);
  const std::int64_t global_rank = GlobalRank(context, local_rank);
  const std::int64_t world_size =
      step ? context.step.num_tasks : static_cast<std::int64_t>(context.num_nodes) * tasks;
  const std::int64_t local_tasks = LocalTasks(context);

  std::vector<Var> vars = {
      {"COHORT_JOB_ID", job_id},
      {"COHORT_JOB_NAME", context.job_name},
      {"COHORT_NODELIST", world_nodelist},
      {"COHORT_NNODES", world_nodes},
      {"COHORT_NODE_RANK", node_rank},
      {"COHORT_NODENAME", context.node_name},
      {"COHORT_CLUSTER", context.cluster_name},
      {"COHORT_PARTITION", context.partition},
  };
  if (!batch) {
    // A batch script is no rank: torchrun and friends run inside it would
    // take these for their own.
    vars.insert(vars.end(), {
                                {"RANK", std::to_string(global_rank)},
                                {"WORLD_SIZE", std::to_string(world_size)},
                                {"LOCAL_RANK", std::to_string(local_rank)},
                                {"LOCAL_WORLD_SIZE", std::to_string(local_tasks)},
                                {"NODE_RANK", node_rank},
                                {"GROUP_RANK", node_rank},
                            });
  }
  std::string master_addr = !context.master_addr.empty() ? context.master_addr
                            : step                       ? FirstNode(context.step.nodelist)
                                                         : FirstNode(context.nodelist);
  if (!master_addr.empty()) vars.emplace_back("MASTER_ADDR", std::move(master_addr));
  if (context.master_port > 0)
    vars.emplace_back("MASTER_PORT", std::to_string(context.master_port));

  std::vector<Var> slurm = {
      {"SLURM_JOB_ID", job_id},
      {"SLURM_JOBID", job_id},
      {"SLURM_JOB_NAME", context.job_name},
      {"SLURM_JOB_NODELIST", nodelist},
      {"SLURM_NODELIST", world_nodelist},
      {"SLURM_JOB_NUM_NODES", num_nodes},
      {"SLURM_NNODES", world_nodes},
      {"SLURM_NTASKS", std::to_string(world_size)},
      {"SLURM_NPROCS", std::to_string(world_size)},
      {"SLURM_NTASKS_PER_NODE", std::to_string(step ? local_tasks : tasks)},
      {"SLURM_NODEID", node_rank},
      {"SLURM_PROCID", std::to_string(global_rank)},
      {"SLURM_LOCALID", std::to_string(batch ? 0 : local_rank)},
      {"SLURM_CPUS_PER_TASK", std::to_string(context.cpus_per_task)},
      {"SLURM_SUBMIT_DIR", context.submit_dir},
      {"SLURM_JOB_PARTITION", context.partition},
      {"SLURM_CLUSTER_NAME", context.cluster_name},
      {"SLURMD_NODENAME", context.node_name},
      {"SLURM_JOB_USER", context.user_name},
  };
  // As Slurm: set once the job has been started again (requeued after a
  // node failure, a preemption or `scontrol requeue`), so that scripts
  // resume from a checkpoint and bound their retries.
  if (context.restart_count > 0) {
    slurm.emplace_back("SLURM_RESTART_COUNT", std::to_string(context.restart_count));
  }
  if (context.overcommit) slurm.emplace_back("SLURM_OVERCOMMIT", "1");
  if (context.imex_channel >= 0) {
    vars.emplace_back("NVIDIA_IMEX_CHANNELS", std::to_string(context.imex_channel));
  }
  if (!context.topology_addr.empty()) {
    slurm.emplace_back("SLURM_TOPOLOGY_ADDR", context.topology_addr);
    slurm.emplace_back("SLURM_TOPOLOGY_ADDR_PATTERN", context.topology_addr_pattern);
  }
  // Slurm's "count(xrepeat)" form: the same on every node of a gang.
  const auto per_node = [&](int count) {
    return context.num_nodes > 1 ? fmt::format("{}(x{})", count, context.num_nodes)
                                 : std::to_string(count);
  };
  const std::string world_tasks_per_node = !step ? per_node(static_cast<int>(tasks))
                                           : context.step.tasks_per_node.empty()
                                               ? std::to_string(local_tasks)
                                               : context.step.tasks_per_node;
  slurm.emplace_back("SLURM_TASKS_PER_NODE", world_tasks_per_node);
  // When the job started and must end by: scripts checkpoint before it.
  if (context.job_start_s > 0) {
    slurm.emplace_back("SLURM_JOB_START_TIME", std::to_string(context.job_start_s));
    if (context.time_limit_s > 0) {
      slurm.emplace_back("SLURM_JOB_END_TIME",
                         std::to_string(context.job_start_s + context.time_limit_s));
    }
  }
  if (!batch) {
    // A gang's ranks are one step over the whole gang, as `srun` inside the
    // allocation would start them; a step's are its own.
    const std::string step_id = std::to_string(context.step_id);
    slurm.emplace_back("SLURM_STEP_ID", step_id);
    slurm.emplace_back("SLURM_STEPID", step_id);
    slurm.emplace_back("SLURM_STEP_NODELIST", world_nodelist);
    slurm.emplace_back("SLURM_STEP_NUM_NODES", world_nodes);
    slurm.emplace_back("SLURM_STEP_NUM_TASKS", std::to_string(world_size));
    slurm.emplace_back("SLURM_STEP_TASKS_PER_NODE", world_tasks_per_node);
    if (!context.mpi_type.empty()) slurm.emplace_back("SLURM_MPI_TYPE", context.mpi_type);
  }
  if (!context.account.empty()) slurm.emplace_back("SLURM_JOB_ACCOUNT", context.account);
  if (context.cpus_on_node > 0) {
    slurm.emplace_back("SLURM_CPUS_ON_NODE", std::to_string(context.cpus_on_node));
    slurm.emplace_back("SLURM_JOB_CPUS_PER_NODE", per_node(context.cpus_on_node));
  }
  if (context.memory_mb > 0)
    slurm.emplace_back("SLURM_MEM_PER_NODE", std::to_string(context.memory_mb));
  if (!context.gpus.empty()) {
    slurm.emplace_back("SLURM_GPUS_ON_NODE", std::to_string(context.gpus.size()));
    slurm.emplace_back("SLURM_JOB_GPUS", fmt::format("{}", fmt::join(context.gpus, ",")));
  }
  if (context.array_job_id != 0) {
    // Slurm's names, and the same under Cohort's own for scripts that do
    // not speak Slurm. (Names are literals: Var holds a view of them.)
    std::vector<std::pair<std::array<std::string_view, 2>, std::string>> array = {
        {{"SLURM_ARRAY_JOB_ID", "COHORT_ARRAY_JOB_ID"}, std::to_string(context.array_job_id)},
        {{"SLURM_ARRAY_TASK_ID", "COHORT_ARRAY_TASK_ID"}, std::to_string(context.array_task_id)}};
    if (context.array_task_count > 0) {
      array.push_back({{"SLURM_ARRAY_TASK_MIN", "COHORT_ARRAY_TASK_MIN"},
                       std::to_string(context.array_task_min)});
      array.push_back({{"SLURM_ARRAY_TASK_MAX", "COHORT_ARRAY_TASK_MAX"},
                       std::to_string(context.array_task_max)});
      array.push_back({{"SLURM_ARRAY_TASK_COUNT", "COHORT_ARRAY_TASK_COUNT"},
                       std::to_string(context.array_task_count)});
      array.push_back({{"SLURM_ARRAY_TASK_STEP", "COHORT_ARRAY_TASK_STEP"},
                       std::to_string(context.array_task_step)});
    }
    for (const int which : {0, 1}) {
      for (const auto& [names, value] : array) slurm.emplace_back(names[which], value);
    }
  }
  std::move(slurm.begin(), slurm.end(), std::back_inserter(vars));
  if (!context.gpus.empty()) {
    vars.emplace_back(kCudaVisibleDevices, fmt::format("{}", fmt::join(context.gpus, ",")));
  }
  return vars;
}

bool ValidName(const std::string& name) {
  return !name.empty() && name.find('=') == std::string::npos;
}

}  // namespace

std::string FormatCountsPerNode(const std::vector<int>& counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size();) {
    std::size_t run = 1;
    while (i + run < counts.size() && counts[i + run] == counts[i]) ++run;
    if (!out.empty()) out += ',';
    out += run > 1 ? fmt::format("{}(x{})", counts[i], run) : std::to_string(counts[i]);
    i += run;
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseCountsPerNode(std::string_view given, std::size_t most) {
  std::vector<int> counts;
  const auto invalid = [&] {
    return absl::InvalidArgumentError(
        fmt::format("tasks per node {:?}: expected counts such as \"2(x3),1\" for at most {} nodes",
                    given, most));
  };
  std::string_view text = given;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    int count = 0;
    std::size_t repeat = 1;
    const std::size_t paren = item.find("(x");
    const std::string_view number = item.substr(0, paren);
    auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (error != std::errc() || end != number.data() + number.size() || count < 0) return invalid();
    if (paren != std::string_view::npos) {
      const std::string_view times = item.substr(paren + 2);
      if (!times.ends_with(')')) return invalid();
      const std::string_view digits = times.substr(0, times.size() - 1);
      auto [stop, bad] = std::from_chars(digits.data(), digits.data() + digits.size(), repeat);
      if (bad != std::errc() || stop != digits.data() + digits.size() || repeat == 0) {
        return invalid();
      }
    }
    if (repeat > most - std::min(most, counts.size())) return invalid();
    counts.insert(counts.end(), repeat, count);
    if (comma != std::string_view::npos && text.empty()) return invalid();
  }
  if (counts.empty()) return invalid();
  return counts;
}

int LocalTasks(const LaunchContext& context) {
  switch (context.kind) {
    case LaunchKind::kBatch:
      return 1;
    case LaunchKind::kStep:
      return context.step.tasks;
    case LaunchKind::kGang:
      break;
  }
  return context.tasks_per_node;
}

std::int64_t GlobalRank(const LaunchContext& context, int local_rank) {
  switch (context.kind) {
    case LaunchKind::kBatch:
      return 0;
    case LaunchKind::kStep:
      return static_cast<std::int64_t>(context.step.first_rank) + local_rank;
    case LaunchKind::kGang:
      break;
  }
  return static_cast<std::int64_t>(context.node_rank) * context.tasks_per_node + local_rank;
}

std::vector<std::string> BuildRankEnvironment(const LaunchContext& context, int local_rank) {
  const std::vector<Var> launch_vars = LaunchVariables(context, local_rank);
  std::unordered_set<std::string_view> replaced = {kCudaVisibleDevices};
  for (const Var& var : launch_vars) replaced.insert(var.first);

  // A name exported twice keeps its first position and its last value, as
  // repeated `export` in a shell would leave it.
  std::vector<const EnvVar*> base;
  std::unordered_map<std::string_view, std::size_t> position;
  for (const EnvVar& var : context.base_env) {
    if (!ValidName(var.name) || replaced.contains(var.name)) continue;
    const auto [it, inserted] = position.try_emplace(var.name, base.size());
    if (inserted) {
      base.push_back(&var);
    } else {
      base[it->second] = &var;
    }
  }

  std::vector<std::string> env;
  env.reserve(base.size() + launch_vars.size());
  for (const EnvVar* var : base) env.push_back(var->name + "=" + var->value);
  for (const auto& [name, value] : launch_vars) env.push_back(fmt::format("{}={}", name, value));
  return env;
}

std::string ExpandOutputPattern(std::string_view pattern, const LaunchContext& context,
                                int global_rank) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char code = pattern[++i];
    switch (code) {
      case 'j':
        out += std::to_string(context.job_id);
        break;
      case 'J':
        // JOB.STEP, as Slurm writes it; a batch script's is the job's id.
        out += std::to_string(context.job_id);
        if (context.kind != LaunchKind::kBatch) out += fmt::format(".{}", context.step_id);
        break;
      case 's':
        out += context.kind == LaunchKind::kBatch ? std::string("batch")
                                                  : std::to_string(context.step_id);
        break;
      case 'x':
        out += context.job_name;
        break;
      case 'u':
        out += context.user_name;
        break;
      case 'N':
        out += context.node_name;
        break;
      case 'n':
        out += std::to_string(context.node_rank);
        break;
      case 't':
        out += std::to_string(global_rank);
        break;
      case 'A':
        // The array's job id; for a job that is not an array, its own id.
        out += std::to_string(context.array_job_id != 0 ? context.array_job_id : context.job_id);
        break;
      case 'a':
        // Slurm writes NO_VAL (4294967294) for a job that is not an array.
        out += context.array_task_id >= 0 ? std::to_string(context.array_task_id) : "4294967294";
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += code;
        break;
    }
  }
  return out;
}

bool PatternIsPerRank(std::string_view pattern) {
  for (std::size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (pattern[i + 1] == 't') return true;
    ++i;  // skip the code, so that "%%t" stays a literal
  }
  return false;
}

}  // namespace cohort::launch
