// SPDX-License-Identifier: Apache-2.0
#include "launch_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cohort/launch/mpi_type.h"
#include "cohort/text/hostlist.h"

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
  if (context.kind == launch::LaunchKind::kStep) {
    const launch::StepLayout& step = context.step;
    if (step.tasks < 1 || step.tasks > kMaxRanksPerNode || step.num_nodes < 1 ||
        step.node_index < 0 || step.node_index >= step.num_nodes || step.first_rank < 0 ||
        static_cast<std::int64_t>(step.first_rank) + step.tasks > step.num_tasks) {
      return PlanFailure(node, fmt::format("step {}: {} tasks from rank {} on node {} of {} do not "
                                           "fit a step of {} tasks",
                                           context.step_id, step.tasks, step.first_rank,
                                           step.node_index, step.num_nodes, step.num_tasks));
    }
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

std::optional<OpenMode> ParseOpenMode(std::string_view name) {
  if (name == "append") return OpenMode::kAppend;
  if (name == "truncate") return OpenMode::kTruncate;
  return std::nullopt;
}

std::string_view RunAsName(RunAs run_as) { return run_as == RunAs::kOwner ? "owner" : "stepd"; }

// Whether the pattern holds `%n` or `%N` (`%%n` is a literal).
bool PatternIsPerNode(std::string_view pattern) {
  for (std::size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (pattern[i + 1] == 'n' || pattern[i + 1] == 'N') return true;
    ++i;
  }
  return false;
}

}  // namespace

OpenMode FileOpenMode(OpenMode job_mode, std::string_view pattern,
                      const launch::LaunchContext& context, int local_rank, int attempt) {
  if (job_mode == OpenMode::kAppend || attempt > 1) return OpenMode::kAppend;
  if (launch::PatternIsPerRank(pattern)) return OpenMode::kTruncate;
  if (local_rank != 0) return OpenMode::kAppend;
  if (PatternIsPerNode(pattern)) return OpenMode::kTruncate;
  return context.node_rank == 0 ? OpenMode::kTruncate : OpenMode::kAppend;
}

std::string ConfinedGpuIndices(std::string_view cuda_visible_devices,
                               const std::vector<int>& granted) {
  std::string out;
  std::size_t start = 0;
  while (start <= cuda_visible_devices.size()) {
    const std::size_t comma =
        std::min(cuda_visible_devices.find(',', start), cuda_visible_devices.size());
    const std::string_view item = cuda_visible_devices.substr(start, comma - start);
    start = comma + 1;
    int index = -1;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), index);
    const auto at = std::lower_bound(granted.begin(), granted.end(), index);
    if (!out.empty()) out += ',';
    if (error == std::errc() && end == item.data() + item.size() && at != granted.end() &&
        *at == index) {
      out += std::to_string(at - granted.begin());
    } else {
      out += item;
    }
  }
  return out;
}

void RocmVisibleDevices(std::vector<std::string>& env) {
  constexpr std::string_view kCuda = "CUDA_VISIBLE_DEVICES=";
  const auto entry = std::find_if(env.begin(), env.end(),
                                  [&](const std::string& e) { return e.starts_with(kCuda); });
  if (entry == env.end()) return;
  const std::string devices = entry->substr(kCuda.size());
  std::string positions;
  for (std::size_t i = 0, n = static_cast<std::size_t>(
                              std::count(devices.begin(), devices.end(), ',') + 1);
       i < n; ++i) {
    positions += fmt::format("{}{}", i == 0 ? "" : ",", i);
  }
  SetVariable(env, "ROCR_VISIBLE_DEVICES", devices);
  SetVariable(env, "HIP_VISIBLE_DEVICES", positions);
  SetVariable(env, "CUDA_VISIBLE_DEVICES", positions);
}

void SetVariable(std::vector<std::string>& env, std::string_view name, std::string_view value) {
  std::erase_if(env, [&](const std::string& entry) {
    return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
           entry[name.size()] == '=';
  });
  env.push_back(fmt::format("{}={}", name, value));
}

namespace {

// The step's shape for its PMIx server, from its layout.
absl::StatusOr<MpiSetup> MpiSetupOf(const launch::LaunchContext& context) {
  const launch::StepLayout& layout = context.step;
  const auto invalid = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("{}: --mpi={}: the step's layout {}",
                                                  context.node_name, context.mpi_type, why));
  };
  MpiSetup mpi;
  mpi.type = context.mpi_type;
  mpi.node_index = layout.node_index;
  absl::StatusOr<std::vector<std::string>> nodes = hostlist::Expand(layout.nodelist);
  if (!nodes.ok()) return invalid(std::string(nodes.status().message()));
  absl::StatusOr<std::vector<int>> tasks =
      launch::ParseCountsPerNode(layout.tasks_per_node, nodes->size());
  if (!tasks.ok()) return invalid(std::string(tasks.status().message()));
  if (tasks->size() != nodes->size() || layout.node_index < 0 ||
      static_cast<std::size_t>(layout.node_index) >= nodes->size()) {
    return invalid(fmt::format("names {} nodes, {} counts and node {}", nodes->size(),
                               tasks->size(), layout.node_index));
  }
  mpi.nodes = *std::move(nodes);
  mpi.tasks = *std::move(tasks);
  return mpi;
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
  file.open_mode = plan.open_mode;
  file.umask = plan.umask & 0777;
  file.agent_socket = agent_socket;
  file.run_as = plan.run_as;
  file.uid = plan.uid;
  file.memory_mb = plan.memory_mb;
  if (context.kind == launch::LaunchKind::kStep) file.step = context.step_id;
  file.io = plan.io;
  file.container = plan.container;
  if (context.kind == launch::LaunchKind::kStep && launch::MpiTypeNeedsServer(context.mpi_type)) {
    absl::StatusOr<MpiSetup> mpi = MpiSetupOf(context);
    if (!mpi.ok()) return mpi.status();
    file.mpi = *std::move(mpi);
  }
  const std::string output_pattern =
      plan.output.empty() ? std::string(kDefaultOutput) : plan.output;
  const int local_tasks = launch::LocalTasks(context);
  file.ranks.reserve(static_cast<std::size_t>(local_tasks));
  for (int local = 0; local < local_tasks; ++local) {
    RankLaunch& rank = file.ranks.emplace_back();
    rank.rank = static_cast<int>(launch::GlobalRank(context, local));
    rank.env = launch::BuildRankEnvironment(context, local);
    SetVariable(rank.env, "SLURM_UMASK", fmt::format("{:04o}", file.umask));
    if (static_cast<std::size_t>(local) < plan.bindings.size()) {
      const binding::RankBinding& bound = plan.bindings[static_cast<std::size_t>(local)];
      // The plan decides what the rank sees: its own GPUs (closest, single)
      // or all of the job's (none), and its nearest adapters.
      if (!bound.cuda_visible_devices.empty()) {
        SetVariable(rank.env, "CUDA_VISIBLE_DEVICES", bound.cuda_visible_devices);
      }
      if (!bound.nccl_ib_hca.empty()) SetVariable(rank.env, "NCCL_IB_HCA", bound.nccl_ib_hca);
      if (plan.apply_binding) {
        rank.cpus = bound.cpus;
        rank.mem_numa = bound.mem_numa;
      }
    }
    if (plan.gpu_numbering == GpuNumbering::kConfined) {
      for (std::string& entry : rank.env) {
        constexpr std::string_view kCuda = "CUDA_VISIBLE_DEVICES=";
        if (entry.starts_with(kCuda)) {
          entry = fmt::format(
              "{}{}", kCuda,
              ConfinedGpuIndices(std::string_view(entry).substr(kCuda.size()), context.gpus));
        }
      }
    }
    if (plan.rocm) RocmVisibleDevices(rank.env);
    rank.output = JoinWorkPath(plan.work_dir,
                               launch::ExpandOutputPattern(output_pattern, context, rank.rank));
    rank.output_mode = FileOpenMode(plan.open_mode, output_pattern, context, local, attempt);
    if (!plan.error.empty()) {
      rank.error =
          JoinWorkPath(plan.work_dir, launch::ExpandOutputPattern(plan.error, context, rank.rank));
      rank.error_mode = FileOpenMode(plan.open_mode, plan.error, context, local, attempt);
    }
  }
  return file;
}

std::string LaunchFileToJson(const LaunchFile& file) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankLaunch& rank : file.ranks) {
    ranks.push_back({{"rank", rank.rank},
                     {"env", rank.env},
                     {"output", rank.output},
                     {"error", rank.error},
                     {"output_mode", OpenModeName(rank.output_mode)},
                     {"error_mode", OpenModeName(rank.error_mode)},
                     {"cpus", rank.cpus},
                     {"mem_numa", rank.mem_numa}});
  }
  nlohmann::json json = {
      {"version", kLaunchFileVersion},
      {"job_id", file.job_id},
      {"attempt", file.attempt},
      {"node", file.node},
      {"argv", file.argv},
      {"script_path", file.script_path},
      {"search_path", file.search_path},
      {"work_dir", file.work_dir},
      {"open_mode", OpenModeName(file.open_mode)},
      {"umask", file.umask},
      {"ranks", std::move(ranks)},
      {"agent_socket", file.agent_socket},
      {"run_as", RunAsName(file.run_as)},
      {"uid", file.uid},
      {"memory_mb", file.memory_mb},
      {"cgroups", file.cgroups},
      {"cpus", file.cpus},
      {"step", file.step},
      {"io_address", file.io.address},
      {"io_key", file.io.key},
      {"stdin_rank", file.io.stdin_rank},
      {"pty", file.io.pty},
      {"io_files", file.io.files},
      {"mpi", file.mpi.type},
      {"mpi_nodes", file.mpi.nodes},
      {"mpi_tasks", file.mpi.tasks},
      {"mpi_node_index", file.mpi.node_index},
      {"mpi_topology_file", file.mpi.topology_file},
  };
  if (file.container.Enabled()) {
    const ContainerSetup& c = file.container;
    json["container"] = {{"image", c.image},
                         {"mounts", c.mounts},
                         {"workdir", c.workdir},
                         {"name", c.name},
                         {"env", c.env},
                         {"save", c.save},
                         {"mount_home", c.mount_home},
                         {"remap_root", c.remap_root},
                         {"writable", c.writable},
                         {"entrypoint", c.entrypoint},
                         {"cache_dir", c.images.cache_dir},
                         {"cache_max_bytes", c.images.cache_max_bytes},
                         {"registry_ca_file", c.images.registry_ca_file},
                         {"credentials_file", c.images.credentials_file},
                         {"registry_mirrors", c.images.registry_mirrors},
                         {"hooks_dir", c.hooks_dir},
                         {"state_dir", c.state_dir},
                         {"devices", c.devices}};
  }
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
    file.step = json.value("step", -1);
    file.io.address = json.value("io_address", std::string());
    file.io.key = json.value("io_key", std::string());
    file.io.stdin_rank = json.value("stdin_rank", -1);
    file.io.pty = json.value("pty", false);
    file.io.files = json.value("io_files", false);
    file.mpi.type = json.value("mpi", std::string());
    file.mpi.nodes = json.value("mpi_nodes", std::vector<std::string>());
    file.mpi.tasks = json.value("mpi_tasks", std::vector<int>());
    file.mpi.node_index = json.value("mpi_node_index", 0);
    file.mpi.topology_file = json.value("mpi_topology_file", std::string());
    if (const auto it = json.find("container"); it != json.end()) {
      ContainerSetup& c = file.container;
      c.image = it->at("image").get<std::string>();
      c.mounts = it->at("mounts").get<std::string>();
      c.workdir = it->at("workdir").get<std::string>();
      c.name = it->at("name").get<std::string>();
      c.env = it->at("env").get<std::string>();
      c.save = it->value("save", std::string());
      c.mount_home = it->at("mount_home").get<bool>();
      c.remap_root = it->at("remap_root").get<bool>();
      c.writable = it->at("writable").get<bool>();
      c.entrypoint = it->at("entrypoint").get<bool>();
      c.images.cache_dir = it->at("cache_dir").get<std::string>();
      c.images.cache_max_bytes = it->at("cache_max_bytes").get<std::int64_t>();
      c.images.registry_ca_file = it->at("registry_ca_file").get<std::string>();
      c.images.credentials_file = it->at("credentials_file").get<std::string>();
      c.images.registry_mirrors = it->value("registry_mirrors", std::vector<std::string>());
      c.hooks_dir = it->value("hooks_dir", std::string());
      c.state_dir = it->at("state_dir").get<std::string>();
      c.devices = it->at("devices").get<std::vector<std::string>>();
    }
    if (!file.mpi.type.empty() &&
        (file.mpi.nodes.empty() || file.mpi.nodes.size() != file.mpi.tasks.size() ||
         file.mpi.node_index < 0 ||
         static_cast<std::size_t>(file.mpi.node_index) >= file.mpi.nodes.size())) {
      return absl::InvalidArgumentError(
          "launch file: mpi_nodes, mpi_tasks and mpi_node_index "
          "disagree");
    }
    const auto mode = [](const nlohmann::json& object,
                         const char* key) -> absl::StatusOr<OpenMode> {
      // Files of an agent before per-rank modes: append, as it did.
      const std::string name = object.value(key, std::string("append"));
      if (const std::optional<OpenMode> parsed = ParseOpenMode(name)) return *parsed;
      return absl::InvalidArgumentError(
          fmt::format("launch file: {} {:?} is neither append nor truncate", key, name));
    };
    absl::StatusOr<OpenMode> open_mode = mode(json, "open_mode");
    if (!open_mode.ok()) return open_mode.status();
    file.open_mode = *open_mode;
    // A file of an agent before umasks: Slurm's default.
    file.umask = json.value("umask", std::uint32_t{022}) & 0777;
    for (const nlohmann::json& entry : json.at("ranks")) {
      RankLaunch& rank = file.ranks.emplace_back();
      rank.rank = entry.at("rank").get<int>();
      rank.env = entry.at("env").get<std::vector<std::string>>();
      rank.output = entry.at("output").get<std::string>();
      rank.error = entry.at("error").get<std::string>();
      absl::StatusOr<OpenMode> output_mode = mode(entry, "output_mode");
      if (!output_mode.ok()) return output_mode.status();
      absl::StatusOr<OpenMode> error_mode = mode(entry, "error_mode");
      if (!error_mode.ok()) return error_mode.status();
      rank.output_mode = *output_mode;
      rank.error_mode = *error_mode;
      rank.cpus = entry.value("cpus", std::vector<int>{});
      rank.mem_numa = entry.value("mem_numa", std::vector<int>{});
    }
    file.agent_socket = json.at("agent_socket").get<std::string>();
    const std::string run_as = json.value("run_as", std::string("stepd"));
    if (run_as != "stepd" && run_as != "owner") {
      return absl::InvalidArgumentError(
          fmt::format("launch file: run_as {:?} is neither stepd nor owner", run_as));
    }
    file.run_as = run_as == "owner" ? RunAs::kOwner : RunAs::kStepd;
    file.uid = json.value("uid", std::uint32_t{0});
    file.memory_mb = json.value("memory_mb", std::int64_t{0});
    file.cgroups = json.value("cgroups", std::vector<std::string>{});
    // A file of an agent before cgroup v1: one cgroup v2 folder.
    if (const std::string v2 = json.value("cgroup", std::string()); !v2.empty()) {
      file.cgroups.push_back(v2);
    }
    file.cpus = json.value("cpus", std::vector<int>{});
    return file;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("launch file: {}", e.what()));
  }
}

std::string LaunchFolderName(const LaunchId& id) {
  if (id.step == kOwnLaunch) return fmt::format("job-{}.{}", id.job_id, id.attempt);
  return fmt::format("job-{}.{}.{}", id.job_id, id.attempt, id.step);
}

std::optional<LaunchId> ParseLaunchFolderName(std::string_view name) {
  if (!name.starts_with("job-")) return std::nullopt;
  name.remove_prefix(4);
  // job, attempt and, for a step, the step: decimal numbers between dots.
  std::vector<std::int64_t> numbers;
  while (true) {
    const std::size_t dot = name.find('.');
    const std::string_view digits = name.substr(0, dot);
    std::int64_t value = -1;
    const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || parsed.ec != std::errc() || parsed.ptr != digits.data() + digits.size() ||
        value < 0) {
      return std::nullopt;
    }
    numbers.push_back(value);
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  if (numbers.size() < 2 || numbers.size() > 3 || numbers[1] > INT_MAX ||
      (numbers.size() == 3 && numbers[2] > INT_MAX)) {
    return std::nullopt;
  }
  LaunchId id;
  id.job_id = numbers[0];
  id.attempt = static_cast<int>(numbers[1]);
  if (numbers.size() == 3) id.step = static_cast<int>(numbers[2]);
  return id;
}

}  // namespace cohort::step
